// Models granary trains. Built on LibTorch modules; not thread-safe (one per rank).
#pragma once

#include <torch/torch.h>

namespace granary {

// The Fashion-MNIST "2 conv + pooling" CNN: conv5x5-32, max-pool 2, conv5x5-64,
// max-pool 2, fc-1024, dropout, fc-classes. Input N x C x H x W float.
struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl(int64_t channels, int64_t height, int64_t width, int64_t classes, double dropout);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(ConvNet);

}  // namespace granary
