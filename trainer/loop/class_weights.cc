#include "trainer/loop/class_weights.h"

namespace granary {

torch::Tensor BalancedClassWeights(const std::vector<uint64_t>& counts) {
  double samples = 0, present = 0;
  for (uint64_t n : counts) {
    samples += static_cast<double>(n);
    present += n > 0 ? 1 : 0;
  }
  std::vector<float> weights;
  for (uint64_t n : counts) {
    weights.push_back(n == 0 ? 0.0f : static_cast<float>(samples / (present * static_cast<double>(n))));
  }
  return torch::tensor(weights, torch::kFloat32);
}

}  // namespace granary
