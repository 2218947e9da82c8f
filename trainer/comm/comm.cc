#include "trainer/comm/comm.h"

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "trainer/comm/comm_backend.h"
#include "trainer/torch_guard.h"

namespace granary {

std::string RankName(int rank, const CommOptions& o) {
  std::string name = "rank " + std::to_string(rank);
  if (o.ranks_per_node > 0) name += " (node " + std::to_string(rank / o.ranks_per_node) + ")";
  return name;
}

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

namespace {

// What a world of one waits for: nothing.
class NothingToWait : public PendingCollective {
 public:
  Status Wait() override { return Status::OK(); }
};

}  // namespace

struct Comm::Impl {
  CommOptions options;
  std::unique_ptr<CommBackend> backend;  // null in a world of one
  torch::Tensor flat;                    // reused packing buffer
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
  if (options.backend != Backend::kGloo && options.backend != Backend::kMpi) {
    return Status::InvalidArgument(std::string("--backend ") + NameOf(options.backend) + ": gloo or mpi");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.world > 1) {
    StatusOr<std::unique_ptr<CommBackend>> backend =
        options.backend == Backend::kMpi ? CreateMpiBackend(options) : CreateGlooBackend(options);
    if (!backend.ok()) return backend.status();
    impl->backend = std::move(backend).value();
  }
  return std::unique_ptr<Comm>(new Comm(std::move(impl)));
}

Status Comm::AllReduceMean(const std::vector<torch::Tensor>& tensors) {
  if (!impl_->backend) return Status::OK();
  torch::Tensor& flat = impl_->flat;
  GRANARY_RETURN_IF_ERROR(CatchTorch("all-reduce", [&] {
    int64_t total = 0;
    for (const auto& t : tensors) total += t.numel();
    if (!flat.defined() || flat.numel() != total) flat = torch::empty({total}, torch::kFloat32);
    int64_t at = 0;
    for (const auto& t : tensors) {
      flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
  }));
  GRANARY_RETURN_IF_ERROR(impl_->backend->AllReduceSum(flat));
  return CatchTorch("all-reduce", [&] {
    flat.div_(static_cast<double>(impl_->options.world));
    int64_t at = 0;
    for (const auto& t : tensors) {
      t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));  // t may be channels-last
      at += t.numel();
    }
  });
}

Status Comm::AllReduceSum(torch::Tensor& tensor) {
  if (!impl_->backend) return Status::OK();
  return impl_->backend->AllReduceSum(tensor);
}

StatusOr<std::unique_ptr<PendingCollective>> Comm::AllReduceSumAsync(const torch::Tensor& tensor) {
  if (!impl_->backend) return std::unique_ptr<PendingCollective>(new NothingToWait());
  return impl_->backend->AllReduceSumAsync(tensor);
}

StatusOr<std::unique_ptr<PendingCollective>> Comm::AllGatherAsync(const torch::Tensor& input,
                                                                  std::vector<torch::Tensor>* outputs) {
  outputs->clear();
  if (!impl_->backend) {
    outputs->push_back(input.clone());
    return std::unique_ptr<PendingCollective>(new NothingToWait());
  }
  return impl_->backend->AllGatherAsync(input, outputs);
}

Status Comm::Broadcast(const std::vector<torch::Tensor>& tensors) {
  if (!impl_->backend) return Status::OK();
  // One broadcast per dtype (BatchNorm has float statistics and an int64
  // batch count), of the tensors packed into one buffer.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, group] : by_dtype) {
    torch::Tensor flat;
    GRANARY_RETURN_IF_ERROR(CatchTorch("broadcast", [&] {
      std::vector<at::Tensor> parts;
      for (const at::Tensor& t : group) parts.push_back(t.reshape({-1}));
      flat = at::cat(parts);
    }));
    GRANARY_RETURN_IF_ERROR(impl_->backend->Broadcast(flat));
    GRANARY_RETURN_IF_ERROR(CatchTorch("broadcast", [&] {
      int64_t offset = 0;
      for (at::Tensor& t : group) {
        t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
        offset += t.numel();
      }
    }));
  }
  return Status::OK();
}

Status Comm::Barrier() {
  if (!impl_->backend) return Status::OK();
  return impl_->backend->Barrier();
}

}  // namespace granary
