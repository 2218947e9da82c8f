#include "trainer/models/mlp.h"

namespace granary {

Mlp::Mlp(const ModelSpec& spec) {
  namespace nn = torch::nn;
  const int64_t in = NumElements(spec.input), hidden = Scaled(spec, 256);
  if (spec.input_mean.defined()) {
    mean_ = register_buffer("input_mean", spec.input_mean.to(torch::kFloat32).reshape({1, in}));
    inv_std_ = register_buffer("input_inv_std", spec.input_std.to(torch::kFloat32).reciprocal().reshape({1, in}));
  }
  fc1_ = register_module("fc1", nn::Linear(in, hidden));
  fc2_ = register_module("fc2", nn::Linear(hidden, hidden));
  drop_ = register_module("drop", nn::Dropout(spec.dropout));
  fc3_ = register_module("fc3", nn::Linear(hidden, spec.classes));
  scale_ = TargetScale(*this, spec);
}

torch::Tensor Mlp::forward(torch::Tensor x) {
  x = x.flatten(1);
  // A missing value (NaN, prep --missing nan) is taken as its feature's mean: 0 once standardised.
  if (mean_.defined()) x = torch::nan_to_num((x - mean_) * inv_std_, 0.0);
  x = torch::relu(fc1_->forward(x));
  x = torch::relu(fc2_->forward(x));
  return scale_(fc3_->forward(drop_->forward(x)));
}

std::string Mlp::TorchScriptForward() const {
  return std::string("def forward(self, x):\n") + "    x = torch.flatten(x, 1)\n" +
         (mean_.defined() ? "    x = torch.nan_to_num((x - self.input_mean) * self.input_inv_std, 0.0)\n" : "") +
         "    x = torch.relu(self.fc1.forward(x))\n"
         "    x = torch.relu(self.fc2.forward(x))\n" +
         scale_.ScriptReturn("self.fc3.forward(self.drop.forward(x))");
}

std::vector<ChannelGroup> Mlp::ChannelGroups() {
  ChannelGroup first{"fc1"}, second{"fc2"};
  first.linear_producers = {fc1_};
  first.linear_consumers = {{fc2_, 1}};
  second.linear_producers = {fc2_};
  second.linear_consumers = {{fc3_, 1}};
  return {first, second};
}

StatusOr<std::shared_ptr<Classifier>> CreateMlp(const ModelSpec& spec) {
  if (spec.input.empty() || NumElements(spec.input) < 1) {
    return Status::InvalidArgument("model mlp: needs an input of at least one element, got " +
                                   ShapeToString(spec.input));
  }
  if (spec.input_mean.defined() && spec.input_mean.numel() != NumElements(spec.input)) {
    return Status::InvalidArgument("model mlp: input statistics for " + std::to_string(spec.input_mean.numel()) +
                                   " features, input has " + ShapeToString(spec.input));
  }
  return std::shared_ptr<Classifier>(std::make_shared<Mlp>(spec));
}

}  // namespace granary
