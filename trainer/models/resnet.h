// resnet: a small ResNet for 32-128 px images. Stem conv3x3-16 (stride 2
// above 64 px), then four stages of one basic block each (two conv3x3 with
// BatchNorm, identity or conv1x1 shortcut) at 16, 32, 64, 128 channels, the
// last three starting with stride 2; global average pooling, dropout,
// fc-classes. Channels scale with --width.
#pragma once

#include "trainer/models/registry.h"
#include "trainer/models/script.h"
#include "trainer/models/staged.h"

namespace granary {

class BasicBlock : public torch::nn::Module, public Scriptable, public PrunableBlock {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride);
  torch::Tensor forward(torch::Tensor x);
  std::string TorchScriptForward() const override;
  // Pruned: the channels between conv1 and conv2 inside; the output's with
  // the residual join's (shortcut or identity).
  void AddInputReaders(ChannelGroup* input) override;
  std::vector<ChannelGroup> InnerGroups(const std::string& path) override;
  bool KeepsInputChannels() const override { return !shortcut_; }
  void AddOutputMakers(ChannelGroup* output) override;

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, shortcut_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, shortcut_bn_{nullptr};
};

using ResNet = StagedNet<BasicBlock>;

// InvalidArgument unless spec.input is C x H x W with H and W at least 8.
StatusOr<std::shared_ptr<Classifier>> CreateResNet(const ModelSpec& spec);

}  // namespace granary
