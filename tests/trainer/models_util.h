// Helpers the model tests share (models_, prune_, quantize_ and script_test).
#pragma once

#include <cstdint>
#include <string>

#include "trainer/models/registry.h"

namespace granary::testing {

// A built-in model and the shape of one sample it takes.
struct ModelCase {
  std::string model;
  Shape input;
};

// `input` with a batch of `n` in front.
inline Shape Batched(int64_t n, const Shape& input) {
  Shape shape = {n};
  shape.insert(shape.end(), input.begin(), input.end());
  return shape;
}

inline int64_t ParameterCount(Classifier& net) {
  int64_t n = 0;
  for (const torch::Tensor& p : net.parameters()) n += p.numel();
  return n;
}

}  // namespace granary::testing
