#include "trainer/comm/bucketed_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <sys/mman.h>

#include <cassert>
#include <chrono>
#include <stdexcept>
#include <string>

#include "trainer/clock.h"
#include "trainer/torch_guard.h"

namespace granary {

struct BucketedSync::Bucket {
  std::vector<size_t> params;  // in the order they sit in `flat`
  std::vector<std::vector<int64_t>> shapes;  // theirs, in that order (for the compression)
  torch::Tensor flat;          // float32, every gradient of the bucket end to end
  size_t pending = 0;          // gradients not yet accumulated this step
  std::unique_ptr<PendingCollective> reduce;
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

// `param`'s shape and strides over `flat` from `offset` on: a new tensor
// sharing flat's memory (and keeping it alive), so that autograd does not
// treat it as a view. `param` is dense (a parameter always is), so its
// elements span exactly numel() floats.
torch::Tensor BucketSlice(const torch::Tensor& flat, int64_t offset, const torch::Tensor& param) {
  return torch::from_blob(
      flat.data_ptr<float>() + offset, param.sizes(), param.strides(), [keep = flat](void*) {},
      flat.options());
}

// A zeroed float32 buffer of `numel` for a bucket, whose whole 2 MiB
// pages the kernel is asked to back with transparent huge pages (advice
// that matters in THP's "madvise" mode and is ignored in "never"); a
// bucket smaller than one such page comes from the usual allocator. Over
// MPI each all-reduce has the kernel read the peer's bucket (single-copy,
// CMA), pinning it a page at a time: on 4 KiB pages that was a tenth of the
// MPI thread's time, and huge pages cut its system CPU by a fifth
// (docs/BENCHMARKS.md, "Buckets on huge pages").
torch::Tensor BucketBuffer(int64_t numel) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
  if (bytes < kHugePage) return torch::zeros({numel}, torch::kFloat32);
  // One page more than asked, so that a 2 MiB boundary falls inside; the
  // spare pages are never touched, so they cost address space, not memory.
  const size_t mapped = bytes + kHugePage;
  void* raw = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::runtime_error("no memory for a bucket of " + std::to_string(bytes) + " bytes");
  const uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) / kHugePage * kHugePage;
  ::madvise(reinterpret_cast<void*>(start), bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
  return torch::from_blob(
      reinterpret_cast<void*>(start), {numel}, [raw, mapped](void*) { ::munmap(raw, mapped); },
      torch::kFloat32);
}

}  // namespace

BucketedSync::BucketedSync(Comm& comm, size_t bucket_bytes, size_t first_bucket_bytes,
                           std::unique_ptr<BucketCompression> compression)
    : comm_(comm),
      compression_(compression ? std::move(compression) : CreateBucketCompression({}, comm).value()),
      bucket_bytes_(bucket_bytes),
      first_bucket_bytes_(first_bucket_bytes) {}

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
  views_.assign(params.size(), torch::Tensor());
  // Reverse registration order: the last layers' gradients come first. As in
  // DDP, a bucket closes once it reaches its size, so the parameter that
  // crosses the limit still goes out with it (a large last layer's all-reduce
  // then runs while backward computes the layers before it).
  std::vector<std::vector<size_t>> groups(1);
  size_t bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {
    if (params[k].scalar_type() != torch::kFloat32) {
      return Status::InvalidArgument("bucketed sync: parameters must be float32");
    }
    if (!params[k].is_non_overlapping_and_dense()) {
      return Status::InvalidArgument("bucketed sync: parameters must be dense tensors");
    }
    groups.back().push_back(k);
    bytes += static_cast<size_t>(params[k].numel()) * sizeof(float);
    if (bytes >= (groups.size() == 1 ? first_bucket_bytes_ : bucket_bytes_) && k > 0) {
      groups.emplace_back();
      bytes = 0;
    }
  }
  return CatchTorch("bucketed sync: buckets", [&] {
    torch::NoGradGuard no_grad;
    for (const std::vector<size_t>& group : groups) {
      auto bucket = std::make_unique<Bucket>();
      bucket->params = group;
      int64_t numel = 0;
      for (size_t k : group) {
        bucket_of_[k] = buckets_.size();
        offset_of_[k] = numel;
        numel += params[k].numel();
        bucket->shapes.push_back(params[k].sizes().vec());
      }
      bucket->flat = BucketBuffer(numel);
      for (size_t k : group) {
        // Each gradient lives in its bucket (DDP's gradient_as_bucket_view):
        // backward accumulates straight into the buffer that is all-reduced,
        // with no copy either way. A fresh tensor over the bucket's memory,
        // not an autograd view, so an optimizer may detach_() and zero_() it.
        views_[k] = BucketSlice(bucket->flat, offset_of_[k], params[k]);
        torch::Tensor& grad = params_[k].mutable_grad();
        if (grad.defined()) views_[k].copy_(grad);
        grad = views_[k];
      }
      buckets_.push_back(std::move(bucket));
    }
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

bool BucketedSync::InBucket(size_t k) const {
  const torch::Tensor& grad = params_[k].grad();
  return grad.defined() && grad.data_ptr() == views_[k].data_ptr() && grad.strides() == views_[k].strides();
}

void BucketedSync::GradientReady(size_t k) {
  Bucket& b = *buckets_[bucket_of_[k]];
  if (b.pending == 0) return;  // a second accumulation in one step: counted once
  if (!InBucket(k)) {
    // Someone replaced the gradient (set it to none, assigned another
    // tensor): it is copied in, and the bucket's slice given back in
    // FinishStep.
    Status copied = CatchTorch("bucketed sync: copy", [&] { views_[k].copy_(params_[k].grad()); });
    if (!copied.ok() && hook_status_.ok()) hook_status_ = copied;
  }
  --b.pending;
  LaunchReadyBuckets();
}

void BucketedSync::LaunchReadyBuckets() {
  // Invariant: buckets are launched in index order, the same on every rank.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    const size_t index = next_launch_++;
    Bucket& b = *buckets_[index];
    assert(!b.reduce && "a bucket launched twice in one step (FinishStep waits for and clears each)");
    StatusOr<std::unique_ptr<PendingCollective>> reduce = compression_->Start(index, b.flat, b.shapes);
    if (!reduce.ok()) {
      if (hook_status_.ok()) hook_status_ = reduce.status();
      continue;
    }
    b.reduce = std::move(reduce).value();
  }
}

Status BucketedSync::FinishStep() {
  // A parameter whose hook did not run this step (unused): the gradient it
  // has, or zeros, is reduced so that every rank still launches every bucket.
  Status status = CatchTorch("bucketed sync: unused parameters", [&] {
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params_.size(); ++k) {
      if (buckets_[bucket_of_[k]]->pending == 0 || InBucket(k)) continue;
      if (params_[k].grad().defined()) {
        views_[k].copy_(params_[k].grad());
      } else {
        views_[k].zero_();
      }
    }
  });
  if (!status.ok() && hook_status_.ok()) hook_status_ = status;
  for (auto& b : buckets_) b->pending = 0;
  LaunchReadyBuckets();
  const auto start = std::chrono::steady_clock::now();
  status = hook_status_;
  hook_status_ = Status::OK();
  for (auto& b : buckets_) {
    if (!b->reduce) continue;
    Status waited = b->reduce->Wait();
    b->reduce.reset();
    if (status.ok()) status = waited;
  }
  blocked_seconds_ += SecondsSince(start);
  GRANARY_RETURN_IF_ERROR(status);
  return CatchTorch("bucketed sync: gradients", [&] {
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params_.size(); ++k) {
      if (!InBucket(k)) params_[k].mutable_grad() = views_[k];
    }
  });
}

}  // namespace granary
