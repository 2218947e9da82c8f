#include "trainer/models/registry.h"

#include <cmath>

#include "trainer/models/convnet.h"
#include "trainer/models/mlp.h"
#include "trainer/models/mobilenet.h"
#include "trainer/models/resnet.h"
#include "trainer/models/script.h"
#include "trainer/named_table.h"

namespace granary {
namespace {

struct Entry {
  const char* name;
  StatusOr<std::shared_ptr<Classifier>> (*create)(const ModelSpec& spec);
};

// Every model, in the order --help lists them.
const Entry kModels[] = {
    {"mlp", &CreateMlp},
    {"convnet", &CreateConvNet},
    {"resnet", &CreateResNet},
    {"mobilenet", &CreateMobileNet},
};

}  // namespace

TargetScale::TargetScale(torch::nn::Module& model, const ModelSpec& spec) {
  if (!spec.regression) return;
  mean_ = model.register_buffer("target_mean", torch::full({1}, spec.target_mean, torch::kFloat32));
  std_ = model.register_buffer("target_std", torch::full({1}, spec.target_std, torch::kFloat32));
}

torch::Tensor TargetScale::operator()(const torch::Tensor& last) const {
  return mean_.defined() ? last * std_ + mean_ : last;
}

std::string TargetScale::ScriptReturn(const std::string& last) const {
  return mean_.defined() ? "    return " + last + " * self.target_std + self.target_mean\n" : "    return " + last + "\n";
}

StatusOr<std::shared_ptr<Classifier>> CreateModel(const ModelSpec& spec) {
  if (spec.classes < 2 && !spec.regression) {
    return Status::InvalidArgument("model " + spec.name + ": needs at least 2 classes");
  }
  if (IsModelFile(spec.name)) return LoadScriptModel(spec);
  const Entry* e = FindByName(kModels, spec.name);
  if (e == nullptr)
    return Status::InvalidArgument("--model " + spec.name + ": unknown (known: " + KnownModelNames() + ")");
  if (!(spec.width >= kMinModelWidth && spec.width <= kMaxModelWidth)) {
    return Status::InvalidArgument("model " + spec.name + ": width " + std::to_string(spec.width) + " out of range");
  }
  return e->create(spec);
}

int64_t Scaled(const ModelSpec& spec, int64_t channels) {
  return std::max<int64_t>(1, std::llround(static_cast<double>(channels) * spec.width));
}

std::vector<torch::Tensor> TrainableParameters(const torch::nn::Module& net) {
  std::vector<torch::Tensor> trainable;
  for (const torch::Tensor& p : net.parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return trainable;
}

Status CheckImageInput(const ModelSpec& spec, int64_t min_side) {
  const Shape& in = spec.input;
  if (in.size() != 3 || in[1] < min_side || in[2] < min_side) {
    return Status::InvalidArgument("model " + spec.name + ": needs a 3-dim image input (C x H x W, H and W >= " +
                                   std::to_string(min_side) + "), got " + ShapeToString(in));
  }
  return Status::OK();
}

bool IsKnownModel(const std::string& name) { return FindByName(kModels, name) != nullptr; }

bool IsModelFile(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".pt") || ends_with(".pth");
}

std::string KnownModelNames() { return JoinNames(kModels); }

}  // namespace granary
