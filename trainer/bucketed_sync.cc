#include "trainer/bucketed_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>

#include "trainer/torch_guard.h"

namespace granary {

struct BucketedSync::Bucket {
  std::vector<size_t> params;  // in the order they sit in `flat`
  torch::Tensor flat;          // float32, every gradient of the bucket end to end
  size_t pending = 0;          // gradients not yet accumulated this step
  std::unique_ptr<PendingReduce> reduce;
};

namespace {

// Calls back when a parameter's gradient accumulator has run.
class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace

BucketedSync::BucketedSync(Comm& comm, size_t bucket_bytes, size_t first_bucket_bytes)
    : comm_(comm), bucket_bytes_(bucket_bytes), first_bucket_bytes_(first_bucket_bytes) {}

BucketedSync::~BucketedSync() {
  for (auto& [acc, key] : hooks_) acc->del_post_hook(key);
  for (auto& b : buckets_) {
    if (b->reduce) b->reduce->Wait().PermitUncheckedError();  // Gloo must be done with `flat`
  }
}

Status BucketedSync::Attach(const std::vector<torch::Tensor>& params) {
  params_ = params;
  bucket_of_.assign(params.size(), 0);
  offset_of_.assign(params.size(), 0);
  // Reverse registration order: the last layers' gradients come first.
  std::vector<std::vector<size_t>> groups(1);
  size_t bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {
    const size_t cap = buckets_.empty() && groups.size() == 1 ? first_bucket_bytes_ : bucket_bytes_;
    const size_t param_bytes = static_cast<size_t>(params[k].numel()) * sizeof(float);
    if (!groups.back().empty() && bytes + param_bytes > cap) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += param_bytes;
  }
  for (const std::vector<size_t>& group : groups) {
    auto bucket = std::make_unique<Bucket>();
    bucket->params = group;
    int64_t numel = 0;
    for (size_t k : group) {
      if (params[k].scalar_type() != torch::kFloat32) {
        return Status::InvalidArgument("bucketed sync: parameters must be float32");
      }
      bucket_of_[k] = buckets_.size();
      offset_of_[k] = numel;
      numel += params[k].numel();
    }
    bucket->flat = torch::zeros({numel}, torch::kFloat32);
    buckets_.push_back(std::move(bucket));
  }
  return CatchTorch("bucketed sync: hooks", [&] {
    for (size_t k = 0; k < params.size(); ++k) {
      std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(params[k]);
      const uintptr_t key = acc->add_post_hook(std::make_unique<ReadyHook>([this, k] { GradientReady(k); }));
      hooks_.emplace_back(std::move(acc), key);
    }
  });
}

std::vector<std::vector<size_t>> BucketedSync::bucket_params() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b->params);
  return out;
}

void BucketedSync::BeginStep() {
  for (auto& b : buckets_) b->pending = b->params.size();
  next_launch_ = 0;
}

void BucketedSync::GradientReady(size_t k) {
  Bucket& b = *buckets_[bucket_of_[k]];
  if (b.pending == 0) return;  // a second accumulation in one step: counted once
  const torch::Tensor& grad = params_[k].grad();
  Status copied = CatchTorch("bucketed sync: copy", [&] {
    b.flat.narrow(0, offset_of_[k], params_[k].numel()).copy_(grad.reshape({-1}));
  });
  if (!copied.ok() && hook_status_.ok()) hook_status_ = copied;
  --b.pending;
  LaunchReadyBuckets();
}

void BucketedSync::LaunchReadyBuckets() {
  // Invariant: buckets are launched in index order, the same on every rank.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    Bucket& b = *buckets_[next_launch_++];
    StatusOr<std::unique_ptr<PendingReduce>> reduce = comm_.AllReduceSumAsync(b.flat);
    if (!reduce.ok()) {
      if (hook_status_.ok()) hook_status_ = reduce.status();
      continue;
    }
    b.reduce = std::move(reduce).value();
  }
}

Status BucketedSync::FinishStep() {
  // A parameter without a gradient this step (unused): its zeros are reduced
  // so every rank still launches every bucket.
  for (size_t k = 0; k < params_.size(); ++k) {
    Bucket& b = *buckets_[bucket_of_[k]];
    if (b.pending > 0 && !params_[k].grad().defined()) {
      b.flat.narrow(0, offset_of_[k], params_[k].numel()).zero_();
    }
  }
  for (auto& b : buckets_) b->pending = 0;
  LaunchReadyBuckets();
  const auto start = std::chrono::steady_clock::now();
  Status status = hook_status_;
  hook_status_ = Status::OK();
  const double world = static_cast<double>(comm_.world());
  for (auto& b : buckets_) {
    if (!b->reduce) continue;
    Status waited = b->reduce->Wait();
    b->reduce.reset();
    if (status.ok()) status = waited;
  }
  blocked_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  GRANARY_RETURN_IF_ERROR(status);
  return CatchTorch("bucketed sync: write back", [&] {
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) {
      if (world > 1) b->flat.div_(world);
      for (size_t k : b->params) {
        torch::Tensor& grad = params_[k].mutable_grad();
        torch::Tensor mean = b->flat.narrow(0, offset_of_[k], params_[k].numel()).view(params_[k].sizes());
        if (grad.defined()) {
          grad.copy_(mean);
        } else {
          grad = mean.clone();
        }
      }
    }
  });
}

}  // namespace granary
