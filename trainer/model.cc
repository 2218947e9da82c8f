#include "trainer/model.h"

namespace granary {

ConvNetImpl::ConvNetImpl(int64_t channels, int64_t height, int64_t width, int64_t classes, double dropout) {
  namespace nn = torch::nn;
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(channels, 32, 5).padding(2)));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 5).padding(2)));
  fc1 = register_module("fc1", nn::Linear(64 * (height / 4) * (width / 4), 1024));
  drop = register_module("drop", nn::Dropout(dropout));
  fc2 = register_module("fc2", nn::Linear(1024, classes));
}

torch::Tensor ConvNetImpl::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
  x = torch::relu(fc1->forward(x.flatten(1)));
  return fc2->forward(drop->forward(x));
}

}  // namespace granary
