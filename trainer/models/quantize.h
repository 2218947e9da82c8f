// INT8 post-training quantization of a TorchScript classifier with LibTorch's
// own graph-mode passes (torch/csrc/jit/passes/quantization, what Python's
// torch.ao.quantization.quantize_jit drives): conv-BatchNorm folding,
// InsertObservers, calibration forwards, InsertQuantDeQuant and Finalize
// (fusion into quantized:: ops with prepacked weights, then freezing).
// Weights: per output channel, symmetric qint8. Activations: per tensor,
// affine quint8 over the min/max seen in calibration. Kernels: the
// quantized engine LibTorch has (onednn, else qnnpack). Training thread only.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

// Makes the quantized engine onednn where this LibTorch has it, else
// qnnpack, and returns its name; FailedPrecondition if it has neither.
StatusOr<std::string> UseInt8Engine();

struct Int8Model {
  torch::jit::Module module;  // frozen, eval mode: forward(x) -> logits
  int int8_layers = 0;        // quantized:: conv and linear ops
  // One line per weighted op left in fp32: the weight, the op, where in the
  // model's code, and why ("fc.weight (aten::matmul at model.py:12): ...").
  std::vector<std::string> fp32_layers;
};

// Fills `*batch` with the next calibration batch (N x sample shape, float32,
// as the model takes it); false when there is none.
using CalibrationBatches = std::function<StatusOr<bool>(torch::Tensor* batch)>;

// `fp32` (left as it is) quantized after calibrating on every batch `next`
// gives. InvalidArgument naming `what` if no layer could be quantized (the
// passes quantize conv2d and linear), FailedPrecondition with LibTorch's
// message if a pass fails; errors from `next` come back as they are.
StatusOr<Int8Model> QuantizeInt8(const torch::jit::Module& fp32, const CalibrationBatches& next,
                                 const std::string& what);

// The quantized:: conv and linear ops of `module`'s forward (0 for an fp32 model).
int CountInt8Layers(const torch::jit::Module& module);

// The bytes `module` takes saved as TorchScript (what torch.jit.save writes),
// with `card_json` as its extra file granary.json (model_card.h).
StatusOr<std::string> TorchScriptBytes(const torch::jit::Module& module, const std::string& what,
                                       const std::string& card_json);

}  // namespace granary
