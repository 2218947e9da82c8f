#include "trainer/models/registry.h"

#include "trainer/models/convnet.h"

namespace granary {
namespace {

struct Entry {
  const char* name;
  StatusOr<std::shared_ptr<Classifier>> (*create)(const ModelSpec& spec);
};

// Every model, in the order --help lists them.
const Entry kModels[] = {
    {"convnet", &CreateConvNet},
};

const Entry* Find(const std::string& name) {
  for (const Entry& e : kModels) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

StatusOr<std::shared_ptr<Classifier>> CreateModel(const ModelSpec& spec) {
  const Entry* e = Find(spec.name);
  if (e == nullptr) return Status::InvalidArgument("--model " + spec.name + ": unknown (known: " + KnownModelNames() + ")");
  if (spec.classes < 2) return Status::InvalidArgument("model " + spec.name + ": needs at least 2 classes");
  return e->create(spec);
}

bool IsKnownModel(const std::string& name) { return Find(name) != nullptr; }

std::string KnownModelNames() {
  std::string names;
  for (const Entry& e : kModels) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

}  // namespace granary
