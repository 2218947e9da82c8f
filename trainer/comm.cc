#include "trainer/comm.h"

#include <cstdlib>
#include <map>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "trainer/heartbeat.h"
#include "trainer/torch_guard.h"

namespace granary {

struct Comm::Impl {
  CommOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  torch::Tensor flat;  // reused packing buffer
};

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
