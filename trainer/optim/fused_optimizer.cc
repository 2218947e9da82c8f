#include "trainer/optim/fused_optimizer.h"

#include <ATen/Parallel.h>

#include <cmath>

namespace granary {
namespace {

// Elements per task when a step is split over the intra-op threads.
constexpr int64_t kGrain = 32 * 1024;

// The key LibTorch's optimizers file a parameter's state under.
std::string StateKey(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

// `grad` with `p`'s strides (a copy only when they differ), so that element i
// of one is element i of the other in memory.
torch::Tensor Aligned(const torch::Tensor& grad, const torch::Tensor& p) {
  TORCH_CHECK(p.scalar_type() == torch::kFloat32 && p.is_non_overlapping_and_dense(),
              "fused optimizer: parameters must be dense float32 tensors");
  TORCH_CHECK(!grad.is_sparse(), "fused optimizer: sparse gradients are not supported");
  if (grad.scalar_type() == torch::kFloat32 && grad.strides() == p.strides()) return grad;
  return torch::empty_like(p).copy_(grad);
}

// A zero state tensor laid out as `p`.
torch::Tensor ZerosLike(const torch::Tensor& p) { return torch::zeros_like(p, torch::MemoryFormat::Preserve); }

// Runs a closure under grad mode, as LibTorch's optimizers do.
torch::Tensor Evaluate(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

struct AdamStep {
  float beta1, beta2, eps;
  float grad_decay;  // Adam: L2 term added to the gradient
  float decoupled;   // AdamW: p *= decoupled before the update (1 when none)
  float step_size;   // lr / (1 - beta1^t)
  float bias2_sqrt;  // sqrt(1 - beta2^t)
};

// One Adam/AdamW update of n elements; max_v is null without amsgrad. The
// loops capture by value and take restrict pointers so that the compiler
// knows no store aliases a coefficient, and vectorises them.
void AdamUpdate(const AdamStep s, int64_t n, float* __restrict w, const float* __restrict g, float* __restrict m,
                float* __restrict v, float* __restrict max_v) {
  at::parallel_for(0, n, kGrain, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float gi = g[i] + s.grad_decay * w[i];
      const float mi = s.beta1 * m[i] + (1 - s.beta1) * gi;
      const float vi = s.beta2 * v[i] + (1 - s.beta2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float second = vi;
      if (max_v != nullptr) {
        second = std::max(max_v[i], vi);
        max_v[i] = second;
      }
      const float denom = std::sqrt(second) / s.bias2_sqrt + s.eps;
      w[i] = w[i] * s.decoupled - s.step_size * mi / denom;
    }
  });
}

template <typename Options, typename State>
void AdamFamilyStep(std::vector<torch::optim::OptimizerParamGroup>& groups,
                    ska::flat_hash_map<std::string, std::unique_ptr<torch::optim::OptimizerParamState>>& states,
                    bool decoupled) {
  for (auto& group : groups) {
    const auto& o = static_cast<const Options&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor g = Aligned(p.grad(), p);
      auto found = states.find(StateKey(p));
      if (found == states.end()) {
        auto state = std::make_unique<State>();
        state->step(0);
        state->exp_avg(ZerosLike(p));
        state->exp_avg_sq(ZerosLike(p));
        if (o.amsgrad()) state->max_exp_avg_sq(ZerosLike(p));
        found = states.emplace(StateKey(p), std::move(state)).first;
      }
      auto& state = static_cast<State&>(*found->second);
      state.step(state.step() + 1);
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      AdamStep s;
      s.beta1 = static_cast<float>(beta1);
      s.beta2 = static_cast<float>(beta2);
      s.eps = static_cast<float>(o.eps());
      s.grad_decay = decoupled ? 0.0f : static_cast<float>(o.weight_decay());
      s.decoupled = decoupled ? static_cast<float>(1 - o.lr() * o.weight_decay()) : 1.0f;
      s.step_size = static_cast<float>(o.lr() / (1 - std::pow(beta1, static_cast<double>(state.step()))));
      s.bias2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, static_cast<double>(state.step()))));
      const torch::Tensor w = p.detach(), m = state.exp_avg(), v = state.exp_avg_sq();
      const torch::Tensor max_v = o.amsgrad() ? state.max_exp_avg_sq() : torch::Tensor();
      AdamUpdate(s, p.numel(), w.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(),
                 max_v.defined() ? max_v.data_ptr<float>() : nullptr);
    }
  }
}

}  // namespace

torch::Tensor FusedSGD::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = Evaluate(closure);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    const float lr = static_cast<float>(o.lr()), decay = static_cast<float>(o.weight_decay());
    const float momentum = static_cast<float>(o.momentum()), keep = static_cast<float>(1 - o.dampening());
    const bool nesterov = o.nesterov();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor g = Aligned(p.grad(), p);
      float* __restrict w = p.detach().data_ptr<float>();
      const float* __restrict gp = g.data_ptr<float>();
      const int64_t n = p.numel();
      if (momentum == 0) {
        at::parallel_for(0, n, kGrain, [=](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) w[i] -= lr * (gp[i] + decay * w[i]);
        });
        continue;
      }
      // The first step fills the buffer with the gradient, as LibTorch's does.
      auto found = state_.find(StateKey(p));
      const bool first = found == state_.end();
      if (first) {
        auto state = std::make_unique<torch::optim::SGDParamState>();
        state->momentum_buffer(ZerosLike(p));
        found = state_.emplace(StateKey(p), std::move(state)).first;
      }
      float* __restrict buf =
          static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer().data_ptr<float>();
      // The first step's buffer is the gradient itself: keep 1, no history.
      const float history = first ? 0.0f : momentum, fresh = first ? 1.0f : keep;
      const float look_ahead = nesterov ? momentum : 0.0f, plain = nesterov ? 0.0f : 1.0f;
      at::parallel_for(0, n, kGrain, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const float d = gp[i] + decay * w[i];
          const float b = history * buf[i] + fresh * d;
          buf[i] = b;
          w[i] -= lr * (plain * b + (1 - plain) * d + look_ahead * b);
        }
      });
    }
  }
  return loss;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = Evaluate(closure);
  AdamFamilyStep<torch::optim::AdamOptions, torch::optim::AdamParamState>(param_groups_, state_, false);
  return loss;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = Evaluate(closure);
  AdamFamilyStep<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(param_groups_, state_, true);
  return loss;
}

}  // namespace granary
