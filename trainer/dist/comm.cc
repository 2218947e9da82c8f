#include "trainer/dist/comm.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "trainer/launch/heartbeat.h"
#include "trainer/torch_guard.h"

namespace granary {

struct Comm::Impl {
  CommOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  torch::Tensor flat;  // reused packing buffer
};

namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// Nodes started with different --ranks or --nnodes disagree on the world's
// size, and Gloo's own rendezvous then only times out (or fails an enforce).
// So each rank posts its world size first; a rank that differs from rank 0
// says so in the store, and rank 0, which waits for every rank's post, fails
// with that line too. FailedPrecondition naming both sizes.
Status AgreeOnWorld(c10d::Store& store, const CommOptions& o) {
  const std::string mine = std::to_string(o.world);
  store.set("granary/world/" + std::to_string(o.rank), Bytes(mine));
  if (o.rank != 0) {
    const std::string first = Text(store.get("granary/world/0"));
    if (first == mine) return Status::OK();
    const std::string why = "rank " + std::to_string(o.rank) + " counts " + mine + " ranks in all, rank 0 counts " +
                            first + ": start every node with the same --ranks and --nnodes";
    store.set("granary/mismatch", Bytes(why));
    return Status::FailedPrecondition(why);
  }
  std::vector<std::string> others;
  for (int r = 1; r < o.world; ++r) others.push_back("granary/world/" + std::to_string(r));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  while (!store.check(others)) {
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
      agreed = AgreeOnWorld(*impl->store, options);
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
  });
  if (!s.ok()) return s;
  if (!agreed.ok()) return agreed.WithContext(where);
  return std::unique_ptr<Comm>(new Comm(std::move(impl)));
}

Status Comm::AllReduceMean(const std::vector<torch::Tensor>& tensors) {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return CatchTorch("all-reduce", [&] {
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
  });
}

namespace {

class GlooPendingReduce : public PendingReduce {
 public:
  explicit GlooPendingReduce(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  Status Wait() override {
    if (!work_) return Status::OK();
    WaitingForPeers waiting;
    Status s = CatchTorch("all-reduce", [&] { work_->wait(); });
    work_.reset();
    return s;
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;  // null: nothing to wait for (one rank)
};

}  // namespace

StatusOr<std::unique_ptr<PendingReduce>> Comm::AllReduceSumAsync(const torch::Tensor& tensor) {
  if (impl_->options.world == 1) return std::unique_ptr<PendingReduce>(new GlooPendingReduce({}));
  c10::intrusive_ptr<c10d::Work> work;
  GRANARY_RETURN_IF_ERROR(CatchTorch("all-reduce", [&] {
    std::vector<at::Tensor> bufs{tensor};
    work = impl_->group->allreduce(bufs);
  }));
  return std::unique_ptr<PendingReduce>(new GlooPendingReduce(std::move(work)));
}

StatusOr<std::unique_ptr<PendingReduce>> Comm::AllGatherAsync(const torch::Tensor& input,
                                                              std::vector<torch::Tensor>* outputs) {
  outputs->clear();
  if (impl_->options.world == 1) {
    outputs->push_back(input.clone());
    return std::unique_ptr<PendingReduce>(new GlooPendingReduce({}));
  }
  c10::intrusive_ptr<c10d::Work> work;
  GRANARY_RETURN_IF_ERROR(CatchTorch("all-gather", [&] {
    for (int r = 0; r < impl_->options.world; ++r) outputs->push_back(torch::empty_like(input));
    std::vector<std::vector<at::Tensor>> out{*outputs};
    std::vector<at::Tensor> in{input};
    work = impl_->group->allgather(out, in);
  }));
  return std::unique_ptr<PendingReduce>(new GlooPendingReduce(std::move(work)));
}

Status Comm::AllReduceSum(torch::Tensor& tensor) {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return CatchTorch("all-reduce", [&] {
    std::vector<at::Tensor> bufs{tensor};
    impl_->group->allreduce(bufs)->wait();
  });
}

Status Comm::Broadcast(const std::vector<torch::Tensor>& tensors) {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return CatchTorch("broadcast", [&] {
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
  });
}

Status Comm::Barrier() {
  if (impl_->options.world == 1) return Status::OK();
  WaitingForPeers waiting;
  return CatchTorch("barrier", [&] { impl_->group->barrier()->wait(); });
}

}  // namespace granary
