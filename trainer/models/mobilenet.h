// mobilenet: depthwise-separable blocks (MobileNet v1's), the lighter model
// for images. Stem conv3x3-16 (stride 2 above 64 px), then blocks of a
// depthwise conv3x3 and a pointwise conv1x1, each with BatchNorm and ReLU, at
// 32, 64, 64, 128, 128, 256 channels (stride 2 where the width doubles after
// the first); global average pooling, dropout, fc-classes. Channels scale
// with --width.
#pragma once

#include "trainer/models/registry.h"
#include "trainer/models/script.h"
#include "trainer/models/staged.h"

namespace granary {

class SeparableBlock : public torch::nn::Module, public Scriptable, public PrunableBlock {
 public:
  SeparableBlock(int64_t in, int64_t out, int64_t stride);
  torch::Tensor forward(torch::Tensor x);
  std::string TorchScriptForward() const override;
  // Pruned: the input's channels run through the depthwise conv (and bn1)
  // into the pointwise one; the output's are the pointwise conv's.
  void AddInputReaders(ChannelGroup* input) override;
  std::vector<ChannelGroup> InnerGroups(const std::string&) override { return {}; }
  bool KeepsInputChannels() const override { return false; }
  void AddOutputMakers(ChannelGroup* output) override;

 private:
  torch::nn::Conv2d depthwise_{nullptr}, pointwise_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
};

using MobileNet = StagedNet<SeparableBlock>;

// InvalidArgument unless spec.input is C x H x W with H and W at least 8.
StatusOr<std::shared_ptr<Classifier>> CreateMobileNet(const ModelSpec& spec);

}  // namespace granary
