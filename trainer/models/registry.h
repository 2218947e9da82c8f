// The models `train --model NAME` can build, one file each beside this one.
// A model is a torch::nn::Module mapping an input batch (N x sample shape,
// float32) to logits (N x classes), or, for a regression target, to the
// value to predict (N x 1). Built per rank; not thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/schema.h"
#include "trainer/config/choices.h"

namespace granary {

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor input) = 0;
};

// What a model is built for: the sample shape as batched (C x H x W for
// images, whatever the stored layout), the class count, and its knobs.
struct ModelSpec {
  std::string name;
  Shape input;
  int64_t classes = 0;
  double dropout = 0;  // before the last layer
  double width = 1;    // channel (or hidden unit) multiplier
  // A regression target (classes 1): the model's one output is the value in
  // the target's units, its last layer's output x target_std + target_mean
  // (the training split's), so that layer learns a standardised value.
  bool regression = false;
  // A model file's last linear layer replaced by one of `classes` outputs
  // (train --new-head: fine-tuning a model trained on other classes).
  bool new_head = false;
  // A model file's parameters but its last linear layer's kept as they are
  // (train --freeze), the module in eval mode throughout.
  bool freeze = false;
  double target_mean = 0, target_std = 1;
  // Feature-vector inputs: per-feature statistics of the training split; the
  // model standardises its input with them (kept as buffers, so a saved model
  // does too). Undefined for images, which the loader normalises.
  torch::Tensor input_mean, input_std;
};

// A regression model's output in the target's units: its last layer's value
// x target_std + target_mean, the two held as buffers of `model` (so a saved
// model predicts in units too); for a classifier, the logits as they are.
class TargetScale {
 public:
  TargetScale() = default;
  TargetScale(torch::nn::Module& model, const ModelSpec& spec);
  torch::Tensor operator()(const torch::Tensor& last) const;
  // The TorchScript line that returns `last` (an expression) so.
  std::string ScriptReturn(const std::string& last) const;

 private:
  torch::Tensor mean_, std_;  // undefined: a classifier
};

// `channels` scaled by the spec's width, at least 1.
int64_t Scaled(const ModelSpec& spec, int64_t channels);
// OK if spec.input is C x H x W with H and W at least `min_side`, else
// InvalidArgument naming the model and the shape.
Status CheckImageInput(const ModelSpec& spec, int64_t min_side);

// InvalidArgument naming the model and the reason if `spec.input` or
// `spec.classes` does not suit it, or if the name is unknown.
StatusOr<std::shared_ptr<Classifier>> CreateModel(const ModelSpec& spec);

// The parameters the optimizer steps and the gradient sync averages: those
// that require grad. A model file frozen in part (a backbone whose
// requires_grad a Python script turned off, or --freeze) keeps the others
// as they are, and backward computes no gradient for them.
std::vector<torch::Tensor> TrainableParameters(const torch::nn::Module& net);

}  // namespace granary
