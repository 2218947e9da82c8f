// convnet: the Fashion-MNIST "2 conv + pooling" CNN: conv5x5-32, max-pool 2,
// conv5x5-64, max-pool 2, fc-1024, dropout, fc-classes (channels and units
// scaled by --width). Input N x C x H x W.
#pragma once

#include "trainer/models/prune.h"
#include "trainer/models/registry.h"
#include "trainer/models/script.h"

namespace granary {

class ConvNet : public Classifier, public Scriptable, public Prunable {
 public:
  explicit ConvNet(const ModelSpec& spec);
  torch::Tensor forward(torch::Tensor x) override;
  std::string TorchScriptForward() const override;
  std::vector<ChannelGroup> ChannelGroups() override;  // conv1 and conv2 filters, fc1 units

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  TargetScale scale_;
};

// InvalidArgument unless spec.input is C x H x W with H and W at least 4.
StatusOr<std::shared_ptr<Classifier>> CreateConvNet(const ModelSpec& spec);

}  // namespace granary
