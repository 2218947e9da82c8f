// The Gloo backend (comm_backend.h): a TCPStore or FileStore rendezvous, the
// ranks' beats in the TCPStore (comm.h), and ProcessGroupGloo's collectives.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <thread>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "base/mutex.h"
#include "trainer/comm/comm_backend.h"
#include "trainer/comm/gloo_device.h"
#include "trainer/comm/stopped.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// The ranks' beats in the TCPStore (see comm.h): a thread adds 1 to
// granary/alive/RANK every kBeat over a client connection of its own; Explain
// reads every rank's count twice, kLostAfter apart. LibTorch 1.13's TCPStore
// client can block for ever in a recv once a link is down, so neither waits
// for the store past a deadline: the store is used from detached threads that
// own what they touch, and one still blocked at the end is left behind.
class Liveness {
 public:
  static constexpr std::chrono::milliseconds kBeat{500}, kLostAfter{1500}, kStoreTimeout{1000};

  Liveness(const CommOptions& o, uint16_t port) : where_(std::make_shared<Where>(Where{o, port})) {
    std::thread([where = where_, beats = beats_] { Beat(*where, *beats); }).detach();
  }
  ~Liveness() {
    Beats& beats = *beats_;
    MutexLock lock(&beats.mutex);
    beats.stop = true;
    beats.wake.NotifyAll();
    beats.wake.WaitFor(beats.mutex, std::chrono::milliseconds(200), [&] {
      beats.mutex.AssertHeld();
      return beats.ended;
    });
  }

  // `failed` (a collective's error) prefixed with the ranks that have stopped
  // beating, or with this rank's own loss of the store; as it is if every
  // rank still beats.
  Status Explain(const Status& failed) const {
    HeartbeatBeat();  // looking is a sign of life: the launcher must not take it for a hang
    const CommOptions& o = where_->options;
    std::packaged_task<std::vector<int>()> find([where = where_] { return Lost(*where); });
    std::future<std::vector<int>> found = find.get_future();
    std::thread(std::move(find)).detach();
    std::vector<int> lost;
    try {
      if (found.wait_for(kLostAfter + kStoreTimeout) != std::future_status::ready) throw std::runtime_error("");
      lost = found.get();
    } catch (const std::exception&) {
      return failed.WithContext("cannot reach the rendezvous store on node 0 (" + o.host + ":" +
                                std::to_string(where_->port) + ") either: this node's link, or node 0, is down");
    }
    if (lost.empty()) return failed;
    std::string names;
    for (int r : lost) {
      names += (names.empty() ? "" : ", ") + std::to_string(r);
      if (o.ranks_per_node > 0) names += " (node " + std::to_string(r / o.ranks_per_node) + ")";
    }
    return failed.WithContext((lost.size() == 1 ? "lost rank " : "lost ranks ") + names + ": no sign of life for " +
                              std::to_string(kLostAfter.count()) + " ms (a process, machine or link is down)");
  }

 private:
  struct Where {
    CommOptions options;
    uint16_t port;
  };
  struct Beats {
    Mutex mutex;
    CondVar wake;
    bool stop GRANARY_GUARDED_BY(mutex) = false;
    bool ended GRANARY_GUARDED_BY(mutex) = false;
  };

  static std::string Key(int rank) { return "granary/alive/" + std::to_string(rank); }
  static std::unique_ptr<c10d::TCPStore> Connect(const Where& where) {
    c10d::TCPStoreOptions o;
    o.port = where.port;
    o.isServer = false;
    o.waitWorkers = false;
    o.timeout = kStoreTimeout;
    return std::make_unique<c10d::TCPStore>(where.options.host, o);
  }

  static void Beat(const Where& where, Beats& beats) GRANARY_EXCLUDES(beats.mutex) {
    std::unique_ptr<c10d::TCPStore> store;
    auto stopped = [&] {
      beats.mutex.AssertHeld();
      return beats.stop;
    };
    for (;;) {
      {
        MutexLock lock(&beats.mutex);
        if (stopped()) break;
      }
      try {
        if (!store) store = Connect(where);
        store->add(Key(where.options.rank), 1);
      } catch (const std::exception&) {
        store.reset();  // reconnect at the next beat (the store's end, or a link down)
      }
      MutexLock lock(&beats.mutex);
      if (beats.wake.WaitFor(beats.mutex, kBeat, stopped)) break;
    }
    MutexLock lock(&beats.mutex);
    beats.ended = true;
    beats.wake.NotifyAll();
  }

  // The other ranks whose counts did not move in kLostAfter; throws if the
  // store cannot be reached.
  static std::vector<int> Lost(const Where& where) {
    const int world = where.options.world;
    std::unique_ptr<c10d::TCPStore> store = Connect(where);
    std::vector<int64_t> before(world);
    for (int r = 0; r < world; ++r) before[r] = store->add(Key(r), 0);
    std::this_thread::sleep_for(kLostAfter);
    std::vector<int> lost;
    for (int r = 0; r < world; ++r) {
      if (r != where.options.rank && store->add(Key(r), 0) == before[r]) lost.push_back(r);
    }
    return lost;
  }

  std::shared_ptr<const Where> where_;
  std::shared_ptr<Beats> beats_ = std::make_shared<Beats>();
};

// A collective's outcome: a failure says which ranks are lost, where
// `liveness` (may be null) can tell.
Status Explained(Status s, const Liveness* liveness) { return s.ok() || !liveness ? s : liveness->Explain(s); }

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// Nodes started with different --ranks or --nnodes disagree on the world's
// size, and Gloo's own rendezvous then only times out (or fails an
// enforce); nodes started with another recipe (compression, learning rate,
// pruning, db) fail inside a collective or silently diverge. So each rank
// posts its world size and recipe; every rank but 0 compares them with
// rank 0's and posts its verdict, a mismatch under granary/mismatch; every
// rank waits for all verdicts. FailedPrecondition, on every rank, naming
// the first difference and both values.
Status AgreeOnRun(c10d::Store& store, const CommOptions& o) {
  const std::string mine = std::to_string(o.world), me = std::to_string(o.rank);
  store.set("granary/world/" + me, Bytes(mine));
  store.set("granary/recipe/" + me, Bytes(o.recipe));
  std::string why;
  if (o.rank != 0) {
    const std::string first = Text(store.get("granary/world/0"));
    if (first != mine) {
      why = "rank " + me + " counts " + mine + " ranks in all, rank 0 counts " + first +
            ": start every node with the same --ranks and --nnodes";
    } else {
      why = RecipeDifference(o.recipe, Text(store.get("granary/recipe/0")), o);
    }
  }
  if (!why.empty()) {
    store.set("granary/mismatch", Bytes(why));
    return Status::FailedPrecondition(why);
  }
  store.set("granary/agreed/" + me, Bytes("ok"));
  std::vector<std::string> all;
  for (int r = 0; r < o.world; ++r) all.push_back("granary/agreed/" + std::to_string(r));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  while (!store.check(all)) {
    if (store.check({"granary/mismatch"})) return Status::FailedPrecondition(Text(store.get("granary/mismatch")));
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::FailedPrecondition("not every one of the " + mine + " ranks joined within --timeout " +
                                        std::to_string(o.timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::OK();
}

// LibTorch's words for a rendezvous that timed out ("Wait timeout", "Socket
// Timeout", "The client socket has timed out ...") say neither who did not
// come nor what to do: the line says both, torch's own words kept after it.
// Other failures are returned as they are.
Status ExplainRendezvousTimeout(const Status& s, const CommOptions& o, bool file, const std::string& where) {
  std::string torch = s.message();
  if (torch.rfind(where + ": ", 0) == 0) torch.erase(0, where.size() + 2);
  if (torch.find("imeout") == std::string::npos && torch.find("imed out") == std::string::npos) return s;
  const std::string within = " within --timeout " + std::to_string(o.timeout_s) + " s";
  const std::string at = o.host + ":" + std::to_string(o.port);
  std::string why;
  if (file) {
    why = "not every one of the " + std::to_string(o.world) + " ranks joined the rendezvous" + within;
  } else if (torch.find("trying to connect") != std::string::npos) {
    const bool on_node_0 = o.ranks_per_node > 0 && o.rank < o.ranks_per_node;  // rank 0 serves it on this machine
    why = o.agent_store ? "torchrun's rendezvous store at " + at + " did not answer" + within
          : on_node_0   ? "rank 0's rendezvous store at " + at + ", on this machine, did not answer" + within +
                            " (rank 0 slow to start, or gone)"
                        : "node 0's rendezvous at " + at + " did not answer" + within +
                            ": start node 0 (--node-rank 0) too, and check --master-addr, --master-port and that "
                            "this machine can reach that port";
  } else {
    const int nodes = o.ranks_per_node > 0 ? o.world / o.ranks_per_node : 0;
    why = "not every one of the " + std::to_string(o.world) + " ranks joined the rendezvous at " + at + within +
          (nodes > 1 ? ": start all " + std::to_string(nodes) +
                           " nodes, each with its own --node-rank and the same --master-addr and --master-port"
                     : "");
  }
  return Status::FailedPrecondition(why + " (torch: " + torch + ")");
}

class GlooPendingReduce : public PendingCollective {
 public:
  // `liveness` (may be null) must outlive the reduce.
  GlooPendingReduce(c10::intrusive_ptr<c10d::Work> work, const Liveness* liveness, const char* what, int timeout_s)
      : work_(std::move(work)), liveness_(liveness), what_(what), timeout_s_(timeout_s) {}
  Status Wait() override {
    if (!work_) return Status::OK();
    WaitingForPeers waiting;
    Status s = CatchTorch(what_, [&] { work_->wait(); });
    work_.reset();
    return ExplainStopped(Explained(std::move(s), liveness_), timeout_s_);
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;  // null: nothing to wait for (one rank)
  const Liveness* liveness_;
  const char* what_;
  int timeout_s_;
};

// Gloo's collectives on a ProcessGroupGloo; a failure says which ranks are
// lost where the TCPStore's beats can tell.
class GlooBackend : public CommBackend {
 public:
  Status AllReduceSum(torch::Tensor& tensor) override {
    WaitingForPeers waiting;
    return Checked(CatchTorch("all-reduce", [&] {
      std::vector<at::Tensor> bufs{tensor};
      group->allreduce(bufs)->wait();
    }));
  }

  StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(const torch::Tensor& tensor) override {
    c10::intrusive_ptr<c10d::Work> work;
    GRANARY_RETURN_IF_ERROR(Checked(CatchTorch("all-reduce", [&] {
      std::vector<at::Tensor> bufs{tensor};
      work = group->allreduce(bufs);
    })));
    return std::unique_ptr<PendingCollective>(
        new GlooPendingReduce(std::move(work), liveness.get(), "all-reduce", options.timeout_s));
  }

  StatusOr<std::unique_ptr<PendingCollective>> AllGatherAsync(const torch::Tensor& input,
                                                              std::vector<torch::Tensor>* outputs) override {
    c10::intrusive_ptr<c10d::Work> work;
    GRANARY_RETURN_IF_ERROR(Checked(CatchTorch("all-gather", [&] {
      for (int r = 0; r < options.world; ++r) outputs->push_back(torch::empty_like(input));
      std::vector<std::vector<at::Tensor>> out{*outputs};
      std::vector<at::Tensor> in{input};
      work = group->allgather(out, in);
    })));
    return std::unique_ptr<PendingCollective>(
        new GlooPendingReduce(std::move(work), liveness.get(), "all-gather", options.timeout_s));
  }

  Status Broadcast(torch::Tensor& tensor) override {
    WaitingForPeers waiting;
    return Checked(CatchTorch("broadcast", [&] {
      std::vector<at::Tensor> bufs{tensor};
      group->broadcast(bufs)->wait();
    }));
  }

  Status Barrier() override {
    WaitingForPeers waiting;
    return Checked(CatchTorch("barrier", [&] { group->barrier()->wait(); }));
  }

  CommOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::unique_ptr<Liveness> liveness;  // over a TCPStore only

 private:
  Status Checked(Status s) const { return ExplainStopped(Explained(std::move(s), liveness.get()), options.timeout_s); }
};

}  // namespace

StatusOr<std::unique_ptr<CommBackend>> CreateGlooBackend(const CommOptions& options) {
  auto impl = std::make_unique<GlooBackend>();
  impl->options = options;
  NoteContinues();
  const bool file = !options.store_file.empty();
  const std::string where = file ? "rendezvous through " + options.store_file
                                 : "rendezvous with " + options.host + ":" + std::to_string(options.port);
  // Chosen before the rendezvous, so that an address no other node can reach is refused first.
  StatusOr<GlooDevice> device = ChooseGlooDevice(file ? "" : options.host, options.iface, options.gloo_socket_ifname);
  if (!device.ok()) return device.status().WithContext("rank " + std::to_string(options.rank));
  WaitingForPeers waiting;
  Status agreed;
  Status s = CatchTorch(where.c_str(), [&] {
    if (file) {
      impl->store = c10::make_intrusive<c10d::FileStore>(options.store_file, options.world);
      impl->store->setTimeout(std::chrono::seconds(options.timeout_s));
    } else {
      c10d::TCPStoreOptions store_options;
      store_options.port = static_cast<uint16_t>(options.port);
      // Under torchrun the agent serves the store (TORCHELASTIC_USE_AGENT_STORE).
      store_options.isServer = options.rank == 0 && !options.agent_store;
      store_options.numWorkers = options.world;
      store_options.waitWorkers = true;
      store_options.timeout = std::chrono::seconds(options.timeout_s);
      impl->store = c10::make_intrusive<c10d::TCPStore>(options.host, store_options);
    }
    if (!file) {
      agreed = AgreeOnRun(*impl->store, options);
      if (!agreed.ok()) return;
    }
    auto pg_options = c10d::ProcessGroupGloo::Options::create();
    pg_options->timeout = std::chrono::seconds(options.timeout_s);
    using c10d::ProcessGroupGloo;
    pg_options->devices.push_back(!device->iface.empty() ? ProcessGroupGloo::createDeviceForInterface(device->iface)
                                  : !device->address.empty()
                                      ? ProcessGroupGloo::createDeviceForHostname(device->address)
                                      : ProcessGroupGloo::createDefaultDevice());
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, options.rank, options.world, pg_options);
    if (!file) {
      impl->liveness =
          std::make_unique<Liveness>(options, static_cast<c10d::TCPStore&>(*impl->store).getPort());
    }
  });
  if (!s.ok()) return ExplainRendezvousTimeout(s, options, file, where);
  if (!agreed.ok()) return agreed.WithContext(where);
  return std::unique_ptr<CommBackend>(std::move(impl));
}

}  // namespace granary
