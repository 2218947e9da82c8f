#include "trainer/models/registry.h"

#include "trainer/models/convnet.h"
#include "trainer/named_table.h"

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

}  // namespace

StatusOr<std::shared_ptr<Classifier>> CreateModel(const ModelSpec& spec) {
  const Entry* e = FindByName(kModels, spec.name);
  if (e == nullptr) return Status::InvalidArgument("--model " + spec.name + ": unknown (known: " + KnownModelNames() + ")");
  if (spec.classes < 2) return Status::InvalidArgument("model " + spec.name + ": needs at least 2 classes");
  return e->create(spec);
}

bool IsKnownModel(const std::string& name) { return FindByName(kModels, name) != nullptr; }

std::string KnownModelNames() { return JoinNames(kModels); }

}  // namespace granary
