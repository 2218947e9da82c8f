#include "trainer/models/mobilenet.h"

namespace granary {
namespace {

namespace nn = torch::nn;

}  // namespace

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

MobileNet::MobileNet(const ModelSpec& spec) {
  const Shape& in = spec.input;
  const int64_t stem_stride = StemStride(spec);
  int64_t channels = Scaled(spec, 16);
  stem_ = register_module("stem",
                          nn::Conv2d(nn::Conv2dOptions(in[0], channels, 3).stride(stem_stride).padding(1).bias(false)));
  stem_bn_ = register_module("stem_bn", nn::BatchNorm2d(channels));
  const struct { int64_t width, stride; } plan[] = {{32, 1}, {64, 2}, {64, 1}, {128, 2}, {128, 1}, {256, 2}};
  for (size_t i = 0; i < std::size(plan); ++i) {
    const int64_t out = Scaled(spec, plan[i].width);
    blocks_.push_back(register_module("block" + std::to_string(i + 1),
                                      std::make_shared<SeparableBlock>(channels, out, plan[i].stride)));
    channels = out;
  }
  drop_ = register_module("drop", nn::Dropout(spec.dropout));
  fc_ = register_module("fc", nn::Linear(channels, spec.classes));
}

torch::Tensor MobileNet::forward(torch::Tensor x) {
  x = torch::relu(stem_bn_->forward(stem_->forward(x)));
  for (const auto& block : blocks_) x = block->forward(x);
  x = x.mean({2, 3});
  return fc_->forward(drop_->forward(x));
}

std::string MobileNet::TorchScriptForward() const { return StemBlocksPoolScript(blocks_.size()); }

StatusOr<std::shared_ptr<Classifier>> CreateMobileNet(const ModelSpec& spec) {
  GRANARY_RETURN_IF_ERROR(CheckImageInput(spec, 8));
  return std::shared_ptr<Classifier>(std::make_shared<MobileNet>(spec));
}

}  // namespace granary
