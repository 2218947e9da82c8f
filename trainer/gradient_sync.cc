#include "trainer/gradient_sync.h"

#include "trainer/after_backward_sync.h"

namespace granary {
namespace {

struct Method {
  const char* name;
  std::unique_ptr<GradientSync> (*create)(Comm& comm);
};

// Every method, in the order --help lists them.
const Method kMethods[] = {
    {"after-backward", [](Comm& comm) -> std::unique_ptr<GradientSync> { return std::make_unique<AfterBackwardSync>(comm); }},
};

const Method* Find(const std::string& name) {
  for (const Method& m : kMethods) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

}  // namespace

StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(const std::string& method, Comm& comm) {
  const Method* m = Find(method);
  if (m == nullptr) {
    return Status::InvalidArgument("--sync " + method + ": unknown (known: " + KnownGradientSyncNames() + ")");
  }
  return m->create(comm);
}

bool IsKnownGradientSync(const std::string& method) { return Find(method) != nullptr; }

std::string KnownGradientSyncNames() {
  std::string names;
  for (const Method& m : kMethods) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

}  // namespace granary
