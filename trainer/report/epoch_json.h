// An epoch's report as JSON and back: what --json and --metrics print for an
// epoch, and what train --tune reads of a probe's output. One mapping of
// names both ways, so a field the reader expects and the writer left out (or
// misnamed) is an error, not a silent 0.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "trainer/report/observer.h"

namespace granary {

nlohmann::json EpochToJson(const EpochReport& report);

// The inverse of EpochToJson. InvalidArgument naming the first member that
// is missing or not of its type (the optional ones: pruned, weights_hash,
// and the test figures, present together or not at all).
StatusOr<EpochReport> EpochFromJson(const nlohmann::json& json);

}  // namespace granary
