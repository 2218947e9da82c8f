// How a model computes: fp32, or bf16 through CPU autocast (weights, gradients
// and optimiser state stay fp32; logits come back fp32 for the loss), and in
// which memory format (channels-last: NHWC activations and conv weights).
// Used from the training thread only (autocast state is per thread).
#pragma once

#include <string>

#include "base/status.h"
#include "trainer/config/config.h"
#include "trainer/models/registry.h"

namespace granary {

class Precision {
 public:
  static Precision Create(const ModelConfig& config);

  // Converts the model's 4-dim weights to channels-last, if asked.
  void Prepare(Classifier& model) const;
  // model.forward(input) under this precision; fp32 logits.
  torch::Tensor Forward(Classifier& model, const torch::Tensor& input) const;
  bool channels_last() const { return channels_last_; }
  bool bf16() const { return bf16_; }

 private:
  bool bf16_ = false;
  bool channels_last_ = false;
};

// Whether this CPU computes bf16 natively (AVX512-BF16 or AMX-BF16).
bool CpuHasNativeBf16();

}  // namespace granary
