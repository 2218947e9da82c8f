// One rank's run assembled: its loader, its model (with a resumed run's
// weights), the ranks joined, its optimizer, where it starts (ResumePoint),
// its batches, and every feature's hook (features/features.h); then the
// engine trains it (loop/rank.h). Blocks for the whole run; call it once per
// process.
#pragma once

#include <optional>
#include <vector>

#include "base/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/loop/rank.h"
#include "trainer/report/observer.h"

namespace granary {

// Runs rank `rank` of `run` (its rendezvous set when ranks > 1), telling
// `observer` as it goes. `resumed`: the checkpoint config.checkpoint.resume
// names, read and checked by the caller (ResolveResume); none for a new run.
StatusOr<std::vector<EpochReport>> RunRank(const ResolvedRun& run, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed);

}  // namespace granary
