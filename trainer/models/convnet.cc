#include "trainer/models/convnet.h"

namespace granary {

ConvNet::ConvNet(const ModelSpec& spec) {
  namespace nn = torch::nn;
  const int64_t channels = spec.input[0], height = spec.input[1], width = spec.input[2];
  const int64_t c1 = Scaled(spec, 32), c2 = Scaled(spec, 64), hidden = Scaled(spec, 1024);
  conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(channels, c1, 5).padding(2)));
  conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(c1, c2, 5).padding(2)));
  fc1_ = register_module("fc1", nn::Linear(c2 * (height / 4) * (width / 4), hidden));
  drop_ = register_module("drop", nn::Dropout(spec.dropout));
  fc2_ = register_module("fc2", nn::Linear(hidden, spec.classes));
  scale_ = TargetScale(*this, spec);
}

torch::Tensor ConvNet::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
  x = torch::relu(fc1_->forward(x.flatten(1)));
  return scale_(fc2_->forward(drop_->forward(x)));
}

std::string ConvNet::TorchScriptForward() const {
  return std::string("def forward(self, x):\n") +
         "    x = torch.max_pool2d(torch.relu(self.conv1.forward(x)), [2, 2])\n"
         "    x = torch.max_pool2d(torch.relu(self.conv2.forward(x)), [2, 2])\n"
         "    x = torch.relu(self.fc1.forward(torch.flatten(x, 1)))\n" +
         scale_.ScriptReturn("self.fc2.forward(self.drop.forward(x))");
}

std::vector<ChannelGroup> ConvNet::ChannelGroups() {
  ChannelGroup c1{"conv1"}, c2{"conv2"}, f1{"fc1"};
  c1.conv_producers = {conv1_};
  c1.conv_consumers = {conv2_};
  c2.conv_producers = {conv2_};
  // fc1 reads conv2's pooled maps flattened: H/4 x W/4 columns per channel.
  c2.linear_consumers = {{fc1_, fc1_->weight.size(1) / conv2_->weight.size(0)}};
  f1.linear_producers = {fc1_};
  f1.linear_consumers = {{fc2_, 1}};
  return {c1, c2, f1};
}

StatusOr<std::shared_ptr<Classifier>> CreateConvNet(const ModelSpec& spec) {
  GRANARY_RETURN_IF_ERROR(CheckImageInput(spec, 4));
  return std::shared_ptr<Classifier>(std::make_shared<ConvNet>(spec));
}

}  // namespace granary
