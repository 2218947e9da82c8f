#include "trainer/gradient_sync.h"

#include "trainer/after_backward_sync.h"
#include "trainer/named_table.h"

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

}  // namespace

StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(const std::string& method, Comm& comm) {
  const Method* m = FindByName(kMethods, method);
  if (m == nullptr) {
    return Status::InvalidArgument("--sync " + method + ": unknown (known: " + KnownGradientSyncNames() + ")");
  }
  return m->create(comm);
}

bool IsKnownGradientSync(const std::string& method) { return FindByName(kMethods, method) != nullptr; }

std::string KnownGradientSyncNames() { return JoinNames(kMethods); }

}  // namespace granary
