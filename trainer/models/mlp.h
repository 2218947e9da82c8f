// mlp: a multilayer perceptron for feature vectors (CSV dbs) or flattened
// images: [standardise,] fc-H, ReLU, fc-H, ReLU, dropout, fc-classes, with
// H = 256 x width (fc-1 and TargetScale for a regression target). Feature
// inputs are standardised with the training split's per-feature mean and std
// (ModelSpec), held as buffers.
#pragma once

#include "trainer/models/prune.h"
#include "trainer/models/registry.h"
#include "trainer/models/script.h"

namespace granary {

class Mlp : public Classifier, public Scriptable, public Prunable {
 public:
  explicit Mlp(const ModelSpec& spec);
  torch::Tensor forward(torch::Tensor x) override;
  std::string TorchScriptForward() const override;
  std::vector<ChannelGroup> ChannelGroups() override;  // the hidden units of fc1 and fc2

 private:
  torch::Tensor mean_, inv_std_;  // undefined: no standardisation
  TargetScale scale_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};

// InvalidArgument unless spec.input has at least one element.
StatusOr<std::shared_ptr<Classifier>> CreateMlp(const ModelSpec& spec);

}  // namespace granary
