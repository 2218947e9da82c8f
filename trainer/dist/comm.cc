#include "trainer/dist/comm.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "store/json_text.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/torch_guard.h"

namespace granary {

// The ranks' beats in the TCPStore (see comm.h): a thread adds 1 to
// granary/alive/RANK every kBeat over a client connection of its own; Explain
// reads every rank's count twice, kLostAfter apart. LibTorch 1.13's TCPStore
// client can block for ever in a recv once a link is down, so neither waits
// for the store past a deadline: the store is used from detached threads that
// own what they touch, and one still blocked at the end is left behind.
// (Outside the anonymous namespace: Comm::Impl holds one.)
class Liveness {
 public:
  static constexpr std::chrono::milliseconds kBeat{500}, kLostAfter{1500}, kStoreTimeout{1000};

  Liveness(const CommOptions& o, uint16_t port) : where_(std::make_shared<Where>(Where{o, port})) {
    std::thread([where = where_, beats = beats_] { Beat(*where, *beats); }).detach();
  }
  ~Liveness() {
    std::unique_lock<std::mutex> lock(beats_->mutex);
    beats_->stop = true;
    beats_->wake.notify_all();
    beats_->wake.wait_for(lock, std::chrono::milliseconds(200), [&] { return beats_->ended; });
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
    std::mutex mutex;
    std::condition_variable wake;
    bool stop = false, ended = false;
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

  static void Beat(const Where& where, Beats& beats) {
    std::unique_ptr<c10d::TCPStore> store;
    std::unique_lock<std::mutex> lock(beats.mutex);
    while (!beats.stop) {
      lock.unlock();
      try {
        if (!store) store = Connect(where);
        store->add(Key(where.options.rank), 1);
      } catch (const std::exception&) {
        store.reset();  // reconnect at the next beat (the store's end, or a link down)
      }
      lock.lock();
      beats.wake.wait_for(lock, kBeat, [&] { return beats.stop; });
    }
    beats.ended = true;
    beats.wake.notify_all();
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

namespace {

// A collective's outcome: a failure says which ranks are lost, where
// `liveness` (may be null) can tell.
Status Explained(Status s, const Liveness* liveness) { return s.ok() || !liveness ? s : liveness->Explain(s); }

}  // namespace

struct Comm::Impl {
  CommOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::unique_ptr<Liveness> liveness;  // over a TCPStore only
  torch::Tensor flat;  // reused packing buffer

  Status Checked(Status s) const { return Explained(std::move(s), liveness.get()); }
};

namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// "rank 2 (node 1)", the node named where it is known.
std::string RankName(int rank, const CommOptions& o) {
  std::string name = "rank " + std::to_string(rank);
  if (o.ranks_per_node > 0) name += " (node " + std::to_string(rank / o.ranks_per_node) + ")";
  return name;
}

// Why this rank's `recipe` and rank 0's `first` (RecipeJson objects) are not
// the same run: the first member that differs, with both values.
std::string RecipeDifference(const std::string& mine, const std::string& first, const CommOptions& o) {
  const nlohmann::json a = ParseJson(mine), b = ParseJson(first);
  if (!a.is_object() || !b.is_object()) return "the run's recipe cannot be compared";
  nlohmann::json both = a;
  both.update(b);
  for (const auto& [member, unused] : both.items()) {
    const nlohmann::json here = a.contains(member) ? a[member] : nlohmann::json("(none)");
    const nlohmann::json there = b.contains(member) ? b[member] : nlohmann::json("(none)");
    if (here == there) continue;
    return "the nodes disagree on the run: " + member + " is " + DumpJson(here) + " on " + RankName(o.rank, o) +
           " and " + DumpJson(there) + " on " + RankName(0, o) +
           ": start every node with the same flags (and a db of the same content)";
  }
  return "";
}

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

}  // namespace

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;
int Comm::rank() const { return impl_->options.rank; }
int Comm::world() const { return impl_->options.world; }

StatusOr<std::unique_ptr<Comm>> Comm::Create(const CommOptions& options) {
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    return Status::InvalidArgument("rank " + std::to_string(options.rank) + " of world " +
                                   std::to_string(options.world));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.world == 1) return std::unique_ptr<Comm>(new Comm(std::move(impl)));
  const bool file = !options.store_file.empty();
  const std::string where = file ? "rendezvous through " + options.store_file
                                 : "rendezvous with " + options.host + ":" + std::to_string(options.port);
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
      const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
      store_options.isServer = options.rank == 0 && !(agent_store != nullptr && std::string(agent_store) == "True");
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
    // Gloo's device: the interface asked for; on one machine the loopback
    // address; else the address this machine's hostname resolves to.
    using c10d::ProcessGroupGloo;
    const bool loopback = file || options.host == "127.0.0.1" || options.host == "localhost";
    pg_options->devices.push_back(!options.iface.empty() ? ProcessGroupGloo::createDeviceForInterface(options.iface)
                                  : loopback
                                      ? ProcessGroupGloo::createDeviceForHostname(file ? "127.0.0.1" : options.host)
                                      : ProcessGroupGloo::createDefaultDevice());
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, options.rank, options.world, pg_options);
    if (!file) {
      impl->liveness =
          std::make_unique<Liveness>(options, static_cast<c10d::TCPStore&>(*impl->store).getPort());
    }
  });
  if (!s.ok()) return s;
  if (!agreed.ok()) return agreed.WithContext(where);
  return std::unique_ptr<Comm>(new Comm(std::move(impl)));
}

Status Comm::AllReduceMean(const std::vector<torch::Tensor>& tensors) {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return impl_->Checked(CatchTorch("all-reduce", [&] {
    int64_t total = 0;
    for (const auto& t : tensors) total += t.numel();
    if (!impl_->flat.defined() || impl_->flat.numel() != total) impl_->flat = torch::empty({total}, torch::kFloat32);
    int64_t at = 0;
    for (const auto& t : tensors) {
      impl_->flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
    std::vector<at::Tensor> bufs{impl_->flat};
    impl_->group->allreduce(bufs)->wait();
    impl_->flat.div_(static_cast<double>(impl_->options.world));
    at = 0;
    for (const auto& t : tensors) {
      t.copy_(impl_->flat.narrow(0, at, t.numel()).view(t.sizes()));  // t may be channels-last
      at += t.numel();
    }
  }));
}

namespace {

class GlooPendingReduce : public PendingReduce {
 public:
  // `liveness` (may be null) must outlive the reduce.
  GlooPendingReduce(c10::intrusive_ptr<c10d::Work> work, const Liveness* liveness, const char* what)
      : work_(std::move(work)), liveness_(liveness), what_(what) {}
  Status Wait() override {
    if (!work_) return Status::OK();
    WaitingForPeers waiting;
    Status s = CatchTorch(what_, [&] { work_->wait(); });
    work_.reset();
    return Explained(std::move(s), liveness_);
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;  // null: nothing to wait for (one rank)
  const Liveness* liveness_;
  const char* what_;
};

}  // namespace

StatusOr<std::unique_ptr<PendingReduce>> Comm::AllReduceSumAsync(const torch::Tensor& tensor) {
  if (impl_->options.world == 1) return std::unique_ptr<PendingReduce>(new GlooPendingReduce({}, nullptr, ""));
  c10::intrusive_ptr<c10d::Work> work;
  GRANARY_RETURN_IF_ERROR(impl_->Checked(CatchTorch("all-reduce", [&] {
    std::vector<at::Tensor> bufs{tensor};
    work = impl_->group->allreduce(bufs);
  })));
  return std::unique_ptr<PendingReduce>(new GlooPendingReduce(std::move(work), impl_->liveness.get(), "all-reduce"));
}

StatusOr<std::unique_ptr<PendingReduce>> Comm::AllGatherAsync(const torch::Tensor& input,
                                                              std::vector<torch::Tensor>* outputs) {
  outputs->clear();
  if (impl_->options.world == 1) {
    outputs->push_back(input.clone());
    return std::unique_ptr<PendingReduce>(new GlooPendingReduce({}, nullptr, ""));
  }
  c10::intrusive_ptr<c10d::Work> work;
  GRANARY_RETURN_IF_ERROR(impl_->Checked(CatchTorch("all-gather", [&] {
    for (int r = 0; r < impl_->options.world; ++r) outputs->push_back(torch::empty_like(input));
    std::vector<std::vector<at::Tensor>> out{*outputs};
    std::vector<at::Tensor> in{input};
    work = impl_->group->allgather(out, in);
  })));
  return std::unique_ptr<PendingReduce>(new GlooPendingReduce(std::move(work), impl_->liveness.get(), "all-gather"));
}

Status Comm::AllReduceSum(torch::Tensor& tensor) {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return impl_->Checked(CatchTorch("all-reduce", [&] {
    std::vector<at::Tensor> bufs{tensor};
    impl_->group->allreduce(bufs)->wait();
  }));
}

Status Comm::Broadcast(const std::vector<torch::Tensor>& tensors) {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return impl_->Checked(CatchTorch("broadcast", [&] {
    // One broadcast per dtype (BatchNorm has float statistics and an int64
    // batch count), of the tensors packed into one buffer.
    std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
    for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
    for (auto& [dtype, group] : by_dtype) {
      std::vector<at::Tensor> flat;
      for (const at::Tensor& t : group) flat.push_back(t.reshape({-1}));
      std::vector<at::Tensor> bufs{at::cat(flat)};
      impl_->group->broadcast(bufs)->wait();
      int64_t offset = 0;
      for (at::Tensor& t : group) {
        t.copy_(bufs[0].narrow(0, offset, t.numel()).view_as(t));
        offset += t.numel();
      }
    }
  }));
}

Status Comm::Barrier() {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return impl_->Checked(CatchTorch("barrier", [&] { impl_->group->barrier()->wait(); }));
}

}  // namespace granary
