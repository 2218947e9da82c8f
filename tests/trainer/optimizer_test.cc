#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "trainer/optim/fused_optimizer.h"

namespace granary {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<torch::Tensor>&)>;

// Parameters of several shapes (one channels-last), filled without the RNG.
std::vector<torch::Tensor> Params() {
  std::vector<torch::Tensor> out;
  const std::vector<std::vector<int64_t>> shapes = {{300, 70}, {70}, {8, 3, 5, 5}, {100000}};
  double k = 1;
  for (const auto& shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    torch::Tensor p = (torch::sin(torch::arange(n, torch::kFloat32) * (0.7 * k++)) * 0.5).view(shape);
    if (shape.size() == 4) p = p.contiguous(torch::MemoryFormat::ChannelsLast);
    out.push_back(p.requires_grad_());
  }
  return out;
}

// Step `step`'s gradients, some near zero (where Adam is most sensitive), one
// with other strides than its parameter.
void SetGradients(const std::vector<torch::Tensor>& params, int step) {
  for (size_t k = 0; k < params.size(); ++k) {
    const torch::Tensor& p = params[k];
    torch::Tensor g =
        torch::cos(torch::arange(p.numel(), torch::kFloat32) * (0.31 + 0.1 * step + 0.05 * k)).view(p.sizes());
    if (k == 0) g = g.t().contiguous().t();  // column-major
    p.mutable_grad() = g;
  }
}

// `steps` steps of the fused optimizer and of LibTorch's, from the same
// parameters and gradients: the parameters stay equal to float rounding.
void ExpectSameSteps(const std::string& name, const MakeOptimizer& fused, const MakeOptimizer& libtorch) {
  std::vector<torch::Tensor> a = Params(), b = Params();
  auto fa = fused(a), fb = libtorch(b);
  for (int step = 0; step < 5; ++step) {
    SetGradients(a, step);
    SetGradients(b, step);
    fa->step();
    fb->step();
  }
  const std::vector<torch::Tensor> initial = Params();
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_FALSE(torch::allclose(b[k], initial[k])) << name << " param " << k << " did not move";
    EXPECT_EQ(a[k].strides(), b[k].strides()) << name << " param " << k;
    EXPECT_TRUE(torch::allclose(a[k], b[k], 1e-5, 1e-6))
        << name << " param " << k << ": max difference " << (a[k] - b[k]).abs().max().item<float>();
  }
}

TEST(FusedOptimizer, SgdStepsAsLibTorchsWithAndWithoutMomentum) {
  for (const auto& o : {torch::optim::SGDOptions(0.1), torch::optim::SGDOptions(0.05).momentum(0.9),
                        torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-2),
                        torch::optim::SGDOptions(0.05).momentum(0.5).dampening(0.3).weight_decay(1e-3),
                        torch::optim::SGDOptions(0.1).weight_decay(0.1)}) {
    ExpectSameSteps(
        "sgd momentum " + std::to_string(o.momentum()) + " nesterov " + std::to_string(o.nesterov()),
        [&](const std::vector<torch::Tensor>& p) { return std::make_unique<FusedSGD>(p, o); },
        [&](const std::vector<torch::Tensor>& p) { return std::make_unique<torch::optim::SGD>(p, o); });
  }
}

TEST(FusedOptimizer, AdamStepsAsLibTorchs) {
  for (const auto& o : {torch::optim::AdamOptions(1e-2), torch::optim::AdamOptions(1e-3).weight_decay(1e-2),
                        torch::optim::AdamOptions(1e-2).amsgrad(true).betas({0.8, 0.99}).eps(1e-6)}) {
    ExpectSameSteps(
        "adam wd " + std::to_string(o.weight_decay()) + " amsgrad " + std::to_string(o.amsgrad()),
        [&](const std::vector<torch::Tensor>& p) { return std::make_unique<FusedAdam>(p, o); },
        [&](const std::vector<torch::Tensor>& p) { return std::make_unique<torch::optim::Adam>(p, o); });
  }
}

TEST(FusedOptimizer, AdamWStepsAsLibTorchs) {
  for (const auto& o :
       {torch::optim::AdamWOptions(1e-2), torch::optim::AdamWOptions(1e-3).weight_decay(0.1).amsgrad(true)}) {
    ExpectSameSteps(
        "adamw wd " + std::to_string(o.weight_decay()),
        [&](const std::vector<torch::Tensor>& p) { return std::make_unique<FusedAdamW>(p, o); },
        [&](const std::vector<torch::Tensor>& p) { return std::make_unique<torch::optim::AdamW>(p, o); });
  }
}

// The state lives where LibTorch's does, so state_dict-style saving sees it.
TEST(FusedOptimizer, KeepsLibTorchsPerParameterState) {
  std::vector<torch::Tensor> p = Params();
  FusedAdam adam(p, torch::optim::AdamOptions(1e-3));
  SetGradients(p, 0);
  adam.step();
  adam.step();
  ASSERT_EQ(adam.state().size(), p.size());
  auto& s =
      static_cast<torch::optim::AdamParamState&>(*adam.state().at(c10::guts::to_string(p[2].unsafeGetTensorImpl())));
  EXPECT_EQ(s.step(), 2);
  EXPECT_EQ(s.exp_avg().strides(), p[2].strides());
  EXPECT_GT(s.exp_avg_sq().abs().sum().item<float>(), 0);
}

}  // namespace
}  // namespace granary
