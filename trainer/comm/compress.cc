#include "trainer/comm/compress.h"

#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <stdexcept>
#include <utility>

#include "trainer/named_table.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// Runs `finish` once the reduces it follows are waited for.
class ThenReduce : public PendingCollective {
 public:
  ThenReduce(std::vector<std::unique_ptr<PendingCollective>> first, std::function<Status()> finish)
      : first_(std::move(first)), finish_(std::move(finish)) {}
  Status Wait() override {
    Status status;
    for (auto& r : first_) {
      Status waited = r->Wait();
      if (status.ok()) status = waited;
    }
    first_.clear();
    if (!status.ok() || !finish_) return status;
    auto finish = std::move(finish_);
    finish_ = nullptr;
    return finish();
  }

 private:
  std::vector<std::unique_ptr<PendingCollective>> first_;
  std::function<Status()> finish_;
};

std::unique_ptr<PendingCollective> Then(std::unique_ptr<PendingCollective> first, std::function<Status()> finish) {
  std::vector<std::unique_ptr<PendingCollective>> v;
  v.push_back(std::move(first));
  return std::make_unique<ThenReduce>(std::move(v), std::move(finish));
}

// Starts summing `flat` over the ranks; `flat` holds the mean once waited for.
StatusOr<std::unique_ptr<PendingCollective>> AllReduceMeanAsync(Comm& comm, const torch::Tensor& flat) {
  StatusOr<std::unique_ptr<PendingCollective>> reduce = comm.AllReduceSumAsync(flat);
  if (!reduce.ok() || comm.world() == 1) return reduce;
  const double world = comm.world();
  return Then(std::move(reduce).value(), [flat, world] { return CatchTorch("mean", [&] { flat.div_(world); }); });
}

class Plain : public BucketCompression {
 public:
  explicit Plain(Comm& comm) : comm_(comm) {}
  StatusOr<std::unique_ptr<PendingCollective>> Start(size_t, const torch::Tensor& flat,
                                                     const std::vector<std::vector<int64_t>>&) override {
    return AllReduceMeanAsync(comm_, flat);
  }

 private:
  Comm& comm_;
};

class Fp16 : public BucketCompression {
 public:
  explicit Fp16(Comm& comm) : comm_(comm) {}
  StatusOr<std::unique_ptr<PendingCollective>> Start(size_t, const torch::Tensor& flat,
                                                     const std::vector<std::vector<int64_t>>&) override {
    torch::Tensor half;
    GRANARY_RETURN_IF_ERROR(CatchTorch("--sync-compress fp16", [&] { half = flat.to(torch::kHalf); }));
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> reduce, comm_.AllReduceSumAsync(half));
    const double world = comm_.world();
    return Then(std::move(reduce), [flat, half, world] {
      return CatchTorch("--sync-compress fp16", [&] {
        torch::Tensor mean = flat;  // written in float32 as it is divided: one pass
        torch::div_out(mean, half, torch::scalar_tensor(world));
      });
    });
  }

 private:
  Comm& comm_;
};

class Bf16 : public BucketCompression {
 public:
  explicit Bf16(Comm& comm) : comm_(comm) {}
  StatusOr<std::unique_ptr<PendingCollective>> Start(size_t, const torch::Tensor& flat,
                                                     const std::vector<std::vector<int64_t>>&) override {
    torch::Tensor bits;  // bfloat16 values viewed as float16 (also 2 bytes): Gloo 1.13 gathers those
    GRANARY_RETURN_IF_ERROR(
        CatchTorch("--sync-compress bf16", [&] { bits = flat.to(torch::kBFloat16).view(torch::kHalf); }));
    auto gathered = std::make_shared<std::vector<torch::Tensor>>();
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> reduce, comm_.AllGatherAsync(bits, gathered.get()));
    return Then(std::move(reduce), [flat, bits, gathered] {
      return CatchTorch("--sync-compress bf16", [&] {
        // Widened as they are added (no float32 copies of the parts): the
        // same sums, three passes over the bucket instead of six.
        flat.copy_((*gathered)[0].view(torch::kBFloat16));
        for (size_t r = 1; r < gathered->size(); ++r) flat.add_((*gathered)[r].view(torch::kBFloat16));
        flat.div_(static_cast<double>(gathered->size()));
      });
    });
  }

 private:
  Comm& comm_;
};

// Gram-Schmidt on the columns of `m` (n x r), in place; epsilon keeps a
// vanishing column finite.
void Orthogonalize(torch::Tensor& m) {
  for (int64_t i = 0; i < m.size(1); ++i) {
    torch::Tensor col = m.narrow(1, i, 1);
    col.div_(col.norm() + 1e-8);
    if (i + 1 < m.size(1)) {
      torch::Tensor rest = m.narrow(1, i + 1, m.size(1) - i - 1);
      rest.sub_((col * rest).sum(0, /*keepdim=*/true) * col);
    }
  }
}

class PowerSgd : public BucketCompression {
 public:
  PowerSgd(Comm& comm, const GradientCompressionOptions& o) : comm_(comm), options_(o) {}

  StatusOr<std::unique_ptr<PendingCollective>> Start(size_t bucket, const torch::Tensor& flat,
                                                     const std::vector<std::vector<int64_t>>& shapes) override {
    State& s = StateOf(bucket);
    if (s.steps++ < options_.warmup_steps) return AllReduceMeanAsync(comm_, flat);
    torch::NoGradGuard no_grad;
    if (!s.error.defined()) GRANARY_RETURN_IF_ERROR(Begin(bucket, s, flat, shapes));
    auto step = std::make_shared<InFlight>();
    GRANARY_RETURN_IF_ERROR(
        CatchTorch("--sync-compress powersgd", [&] { Compress(s, flat, *step); }));
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> reduce, comm_.AllReduceSumAsync(step->first));
    return Then(std::move(reduce), [this, &s, flat, step] { return Finish(s, flat, *step); });
  }

  CompressionState SaveState() const override {
    CompressionState state;
    for (const auto& [bucket, s] : states_) {
      const std::string name = BucketName(bucket);
      state.shared[name + "_steps"] = torch::tensor(static_cast<int64_t>(s.steps));
      if (!s.error.defined()) continue;
      for (size_t i = 0; i < s.q.size(); ++i) state.shared[name + "_q" + std::to_string(i)] = s.q[i].clone();
      state.own[name + "_error"] = s.error.clone();
    }
    return state;
  }

  Status LoadState(const CompressionState& state) override {
    restored_ = state;
    return Status::OK();
  }

 private:
  struct Matrix {
    int64_t offset, rows, cols;
    size_t q;  // its Q in State::q
  };
  struct State {
    int steps = 0;
    torch::Tensor error;             // what the approximations missed, per element of the bucket
    std::vector<torch::Tensor> q;    // per compressed matrix, cols x matrix_rank, warm-started
    std::vector<Matrix> matrices;
    std::vector<std::pair<int64_t, int64_t>> vectors;  // (offset, numel) sent uncompressed
  };
  struct InFlight {  // one step's all-reduce, between Start and Finish
    torch::Tensor first;  // what is all-reduced first: the uncompressed parts, then every matrix's P, packed
  };

  void FindMatrices(size_t bucket, State& s, const std::vector<std::vector<int64_t>>& shapes) {
    int64_t offset = 0;
    for (size_t j = 0; j < shapes.size(); ++j) {
      int64_t numel = 1;
      for (int64_t d : shapes[j]) numel *= d;
      const int64_t rows = shapes[j].empty() ? 1 : shapes[j][0], cols = rows > 0 ? numel / rows : 0;
      const int64_t r = std::min<int64_t>(options_.matrix_rank, std::min(rows, cols));
      if (shapes[j].size() >= 2 && r * (rows + cols) < numel) {
        auto gen = at::make_generator<at::CPUGeneratorImpl>(options_.seed * 1000003 + bucket * 1009 + j);
        s.q.push_back(torch::randn({cols, r}, gen));
        s.matrices.push_back({offset, rows, cols, s.q.size() - 1});
      } else {
        s.vectors.emplace_back(offset, numel);
      }
      offset += numel;
    }
  }

  // The prefix of a bucket's tensors in a CompressionState (docs/FORMAT.md).
  static std::string BucketName(size_t bucket) { return "bucket" + std::to_string(bucket); }

  // The bucket's state: new, or its step count from a checkpoint (LoadState).
  State& StateOf(size_t bucket) {
    auto [it, added] = states_.try_emplace(bucket);
    const auto steps = restored_.shared.find(BucketName(bucket) + "_steps");
    if (added && steps != restored_.shared.end()) it->second.steps = static_cast<int>(steps->second.item<int64_t>());
    return it->second;
  }

  // The bucket's first compressed step: its matrices, a zero error and a
  // random Q, or the error and Q of a checkpoint (LoadState).
  Status Begin(size_t bucket, State& s, const torch::Tensor& flat, const std::vector<std::vector<int64_t>>& shapes) {
    const std::string name = BucketName(bucket);
    return CatchTorch("--sync-compress powersgd", [&] {
      FindMatrices(bucket, s, shapes);
      s.error = torch::zeros_like(flat);
      const auto error = restored_.own.find(name + "_error");
      if (error == restored_.own.end()) return;
      auto misfit = [&](const std::string& what) {
        throw std::runtime_error("the checkpoint's state of " + name + " does not fit this run's (" + what + ")");
      };
      if (error->second.sizes() != s.error.sizes()) misfit("error buffer");
      s.error.copy_(error->second);
      for (size_t i = 0; i < s.q.size(); ++i) {
        const auto q = restored_.shared.find(name + "_q" + std::to_string(i));
        if (q == restored_.shared.end() || q->second.sizes() != s.q[i].sizes()) misfit("Q " + std::to_string(i));
        s.q[i].copy_(q->second);
      }
    });
  }

  // Matrix `m`'s part of a bucket-long tensor, as rows x cols.
  static torch::Tensor MatrixOf(const torch::Tensor& t, const Matrix& m) {
    return t.narrow(0, m.offset, m.rows * m.cols).view({m.rows, m.cols});
  }

  // Between Compress and Finish each matrix's part of s.error holds this
  // rank's M (its gradient plus the error fed back), so that M is built,
  // read and turned into the next error in place: the passes over the
  // bucket's memory are what PowerSGD costs on a CPU.
  void Compress(State& s, const torch::Tensor& flat, InFlight& step) {
    std::vector<torch::Tensor> parts;  // one all-reduce, not two: at many nodes a ring's latency counts
    for (const auto& [offset, numel] : s.vectors) parts.push_back(flat.narrow(0, offset, numel));
    for (const Matrix& m : s.matrices) {
      torch::Tensor local = MatrixOf(s.error, m);
      local.add_(MatrixOf(flat, m));
      parts.push_back(torch::mm(local, s.q[m.q]).flatten());
    }
    step.first = torch::cat(parts);
  }

  Status Finish(State& s, const torch::Tensor& flat, InFlight& step) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> p, qs;
    const double world = static_cast<double>(comm_.world());
    GRANARY_RETURN_IF_ERROR(CatchTorch("--sync-compress powersgd", [&] {
      int64_t at = 0;
      for (const auto& [offset, numel] : s.vectors) {
        torch::Tensor mean = flat.narrow(0, offset, numel);
        torch::div_out(mean, step.first.narrow(0, at, numel), torch::scalar_tensor(world));
        at += numel;
      }
      for (const Matrix& m : s.matrices) {
        const int64_t r = s.q[m.q].size(1);
        torch::Tensor pm = step.first.narrow(0, at, m.rows * r).view({m.rows, r}).clone();
        at += m.rows * r;
        Orthogonalize(pm);
        p.push_back(pm);
        qs.push_back(torch::mm(MatrixOf(s.error, m).t(), pm).flatten());
      }
    }));
    if (s.matrices.empty()) return Status::OK();
    torch::Tensor q = torch::cat(qs);
    GRANARY_RETURN_IF_ERROR(comm_.AllReduceSum(q));
    return CatchTorch("--sync-compress powersgd", [&] {
      int64_t at = 0;
      for (size_t i = 0; i < s.matrices.size(); ++i) {
        const Matrix& m = s.matrices[i];
        const int64_t r = s.q[m.q].size(1);
        s.q[m.q] = q.narrow(0, at, m.cols * r).view({m.cols, r}).clone();  // the next step's warm start
        at += m.cols * r;
        // The mean P Q^T / world, written once; error feedback: this rank's M
        // less the mean it will apply, in place.
        torch::Tensor mean = MatrixOf(flat, m);
        torch::addmm_out(mean, mean, p[i], s.q[m.q].t(), /*beta=*/0, /*alpha=*/1.0 / world);
        MatrixOf(s.error, m).sub_(mean);
      }
    });
  }

  Comm& comm_;
  GradientCompressionOptions options_;
  std::map<size_t, State> states_;
  CompressionState restored_;  // LoadState's, taken up as each bucket first needs it
};

}  // namespace

Status BucketCompression::LoadState(const CompressionState& state) {
  if (state.empty()) return Status::OK();
  return Status::InvalidArgument("the checkpoint has gradient compression state; this method keeps none");
}

StatusOr<std::unique_ptr<BucketCompression>> CreateBucketCompression(const GradientCompressionOptions& o, Comm& comm) {
  switch (o.method) {
    case Compression::kNone: return std::unique_ptr<BucketCompression>(std::make_unique<Plain>(comm));
    case Compression::kFp16: return std::unique_ptr<BucketCompression>(std::make_unique<Fp16>(comm));
    case Compression::kBf16: return std::unique_ptr<BucketCompression>(std::make_unique<Bf16>(comm));
    case Compression::kPowerSgd: return std::unique_ptr<BucketCompression>(std::make_unique<PowerSgd>(comm, o));
  }
  return Status::InvalidArgument("--sync-compress: no such method");  // not reached: the switch names every one
}

}  // namespace granary
