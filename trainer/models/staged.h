// The image models made of a stem (conv3x3 + BatchNorm + ReLU; stride 2 above
// 64 px, so 65-128 px inputs cost about what 64 px ones do), a chain of
// blocks, global average pooling, dropout and a linear classifier: resnet
// (BasicBlock) and mobilenet (SeparableBlock). Block(in, out, stride) is a
// Scriptable and PrunableBlock module.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "trainer/models/prune.h"
#include "trainer/models/registry.h"
#include "trainer/models/script.h"

namespace granary {

struct Stage {
  int64_t width;  // output channels at --width 1
  int64_t stride;
};

template <typename Block>
class StagedNet : public Classifier, public Scriptable, public Prunable {
 public:
  StagedNet(const ModelSpec& spec, int64_t stem_width, const std::vector<Stage>& stages) {
    namespace nn = torch::nn;
    const int64_t stem_stride = std::max(spec.input[1], spec.input[2]) > 64 ? 2 : 1;
    int64_t channels = Scaled(spec, stem_width);
    stem_ = register_module(
        "stem", nn::Conv2d(nn::Conv2dOptions(spec.input[0], channels, 3).stride(stem_stride).padding(1).bias(false)));
    stem_bn_ = register_module("stem_bn", nn::BatchNorm2d(channels));
    for (size_t i = 0; i < stages.size(); ++i) {
      const int64_t out = Scaled(spec, stages[i].width);
      blocks_.push_back(
          register_module("block" + std::to_string(i + 1), std::make_shared<Block>(channels, out, stages[i].stride)));
      channels = out;
    }
    drop_ = register_module("drop", nn::Dropout(spec.dropout));
    fc_ = register_module("fc", nn::Linear(channels, spec.classes));
    scale_ = TargetScale(*this, spec);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(stem_bn_->forward(stem_->forward(x)));
    for (const auto& block : blocks_) x = block->forward(x);
    x = x.mean({2, 3});  // global average pooling
    return scale_(fc_->forward(drop_->forward(x)));
  }

  std::string TorchScriptForward() const override {
    std::string source = "def forward(self, x):\n    x = torch.relu(self.stem_bn.forward(self.stem.forward(x)))\n";
    for (size_t i = 1; i <= blocks_.size(); ++i) source += "    x = self.block" + std::to_string(i) + ".forward(x)\n";
    return source + scale_.ScriptReturn("self.fc.forward(self.drop.forward(torch.mean(x, [2, 3])))");
  }

  // The trunk's channels (the stem's, then each block's output, joined by
  // identity residuals), each block's inner ones; fc reads the last trunk.
  std::vector<ChannelGroup> ChannelGroups() override {
    std::vector<ChannelGroup> groups;
    ChannelGroup trunk{"stem"};
    trunk.conv_producers = {stem_};
    trunk.norms = {stem_bn_};
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const std::string path = "block" + std::to_string(i + 1);
      blocks_[i]->AddInputReaders(&trunk);
      if (!blocks_[i]->KeepsInputChannels()) {
        groups.push_back(std::move(trunk));
        trunk = ChannelGroup{path};
      }
      blocks_[i]->AddOutputMakers(&trunk);
      for (ChannelGroup& inner : blocks_[i]->InnerGroups(path)) groups.push_back(std::move(inner));
    }
    trunk.linear_consumers = {{fc_, 1}};
    groups.push_back(std::move(trunk));
    return groups;
  }

 private:
  torch::nn::Conv2d stem_{nullptr};
  torch::nn::BatchNorm2d stem_bn_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::Dropout drop_{nullptr};
  torch::nn::Linear fc_{nullptr};
  TargetScale scale_;
};

}  // namespace granary
