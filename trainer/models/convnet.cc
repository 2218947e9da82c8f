#include "trainer/models/convnet.h"

namespace granary {

ConvNet::ConvNet(int64_t channels, int64_t height, int64_t width, int64_t classes, double dropout) {
  namespace nn = torch::nn;
  conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(channels, 32, 5).padding(2)));
  conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 5).padding(2)));
  fc1_ = register_module("fc1", nn::Linear(64 * (height / 4) * (width / 4), 1024));
  drop_ = register_module("drop", nn::Dropout(dropout));
  fc2_ = register_module("fc2", nn::Linear(1024, classes));
}

torch::Tensor ConvNet::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
  x = torch::relu(fc1_->forward(x.flatten(1)));
  return fc2_->forward(drop_->forward(x));
}

StatusOr<std::shared_ptr<Classifier>> CreateConvNet(const ModelSpec& spec) {
  const Shape& in = spec.input;
  if (in.size() != 3 || in[1] < 4 || in[2] < 4) {
    return Status::InvalidArgument("model convnet: needs a 3-dim image input (C x H x W, H and W >= 4), got " +
                                   ShapeToString(in));
  }
  return std::shared_ptr<Classifier>(std::make_shared<ConvNet>(in[0], in[1], in[2], spec.classes, spec.dropout));
}

}  // namespace granary
