#include "trainer/models/mobilenet.h"

namespace granary {

namespace nn = torch::nn;

SeparableBlock::SeparableBlock(int64_t in, int64_t out, int64_t stride) {
  depthwise_ = register_module(
      "depthwise", nn::Conv2d(nn::Conv2dOptions(in, in, 3).stride(stride).padding(1).groups(in).bias(false)));
  bn1_ = register_module("bn1", nn::BatchNorm2d(in));
  pointwise_ = register_module("pointwise", nn::Conv2d(nn::Conv2dOptions(in, out, 1).bias(false)));
  bn2_ = register_module("bn2", nn::BatchNorm2d(out));
}

torch::Tensor SeparableBlock::forward(torch::Tensor x) {
  x = torch::relu(bn1_->forward(depthwise_->forward(x)));
  return torch::relu(bn2_->forward(pointwise_->forward(x)));
}

std::string SeparableBlock::TorchScriptForward() const {
  return "def forward(self, x):\n"
         "    x = torch.relu(self.bn1.forward(self.depthwise.forward(x)))\n"
         "    return torch.relu(self.bn2.forward(self.pointwise.forward(x)))\n";
}

void SeparableBlock::AddInputReaders(ChannelGroup* input) {
  input->depthwise.push_back(depthwise_);
  input->norms.push_back(bn1_);
  input->conv_consumers.push_back(pointwise_);
}

void SeparableBlock::AddOutputMakers(ChannelGroup* output) {
  output->conv_producers.push_back(pointwise_);
  output->norms.push_back(bn2_);
}

StatusOr<std::shared_ptr<Classifier>> CreateMobileNet(const ModelSpec& spec) {
  GRANARY_RETURN_IF_ERROR(CheckImageInput(spec, 8));
  return std::shared_ptr<Classifier>(std::make_shared<MobileNet>(
      spec, 16, std::vector<Stage>{{32, 1}, {64, 2}, {64, 1}, {128, 2}, {128, 1}, {256, 2}}));
}

}  // namespace granary
