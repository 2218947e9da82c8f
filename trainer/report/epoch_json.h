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

// The inverse of EpochToJson. InvalidArgument naming the first of the
// loop's members that is missing or not of its type; every other member is
// a figure a hook added (a string or a number; an integer that is not
// negative comes back as uint64_t).
StatusOr<EpochReport> EpochFromJson(const nlohmann::json& json);

}  // namespace granary
