// A model's forward as a function, so that evaluation and the inference
// timing take any model: a built-in one in its precision, a TorchScript
// module, an INT8 one.
#pragma once

#include <torch/script.h>

#include <functional>

namespace granary {

// Logits (N x classes) of an input batch.
using ForwardFn = std::function<torch::Tensor(const torch::Tensor& input)>;

// A TorchScript classifier's forward; `module` must outlive it.
inline ForwardFn ModuleForward(torch::jit::Module& module) {
  return [&module](const torch::Tensor& x) { return module.forward({x}).toTensor(); };
}

}  // namespace granary
