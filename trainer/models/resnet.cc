#include "trainer/models/resnet.h"

namespace granary {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

}  // namespace

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride) {
  conv1_ = register_module("conv1", Conv(in, out, 3, stride));
  bn1_ = register_module("bn1", nn::BatchNorm2d(out));
  conv2_ = register_module("conv2", Conv(out, out, 3, 1));
  bn2_ = register_module("bn2", nn::BatchNorm2d(out));
  if (stride != 1 || in != out) {
    shortcut_ = register_module("shortcut", Conv(in, out, 1, stride));
    shortcut_bn_ = register_module("shortcut_bn", nn::BatchNorm2d(out));
  }
}

torch::Tensor BasicBlock::forward(torch::Tensor x) {
  torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
  y = bn2_->forward(conv2_->forward(y));
  return torch::relu(y + (shortcut_ ? shortcut_bn_->forward(shortcut_->forward(x)) : x));
}

std::string BasicBlock::TorchScriptForward() const {
  return std::string("def forward(self, x):\n") +
         "    y = torch.relu(self.bn1.forward(self.conv1.forward(x)))\n"
         "    y = self.bn2.forward(self.conv2.forward(y))\n" +
         (shortcut_ ? "    return torch.relu(y + self.shortcut_bn.forward(self.shortcut.forward(x)))\n"
                    : "    return torch.relu(y + x)\n");
}

void BasicBlock::AddInputReaders(ChannelGroup* input) {
  input->conv_consumers.push_back(conv1_);
  if (shortcut_) input->conv_consumers.push_back(shortcut_);
}

std::vector<ChannelGroup> BasicBlock::InnerGroups(const std::string& path) {
  ChannelGroup inner{path + ".conv1"};
  inner.conv_producers = {conv1_};
  inner.norms = {bn1_};
  inner.conv_consumers = {conv2_};
  return {inner};
}

void BasicBlock::AddOutputMakers(ChannelGroup* output) {
  output->conv_producers.push_back(conv2_);
  output->norms.push_back(bn2_);
  if (shortcut_) {
    output->conv_producers.push_back(shortcut_);
    output->norms.push_back(shortcut_bn_);
  }
}

StatusOr<std::shared_ptr<Classifier>> CreateResNet(const ModelSpec& spec) {
  GRANARY_RETURN_IF_ERROR(CheckImageInput(spec, 8));
  return std::shared_ptr<Classifier>(
      std::make_shared<ResNet>(spec, 16, std::vector<Stage>{{16, 1}, {32, 2}, {64, 2}, {128, 2}}));
}

}  // namespace granary
