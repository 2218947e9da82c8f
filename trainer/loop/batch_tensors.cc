#include "trainer/loop/batch_tensors.h"

namespace granary {

torch::Tensor InputTensor(Batch& b, bool channels_last) {
  torch::Tensor t = torch::from_blob(b.input.data(), b.input_shape, torch::kFloat32);
  return channels_last ? t.permute({0, 3, 1, 2}) : t;
}

torch::Tensor TargetTensor(Batch& b) {
  const int64_t size = static_cast<int64_t>(b.size);
  if (b.value_target) return torch::from_blob(b.target_values.data(), {size}, torch::kFloat32);
  return torch::from_blob(b.target.data(), {size}, torch::kInt64);
}

}  // namespace granary
