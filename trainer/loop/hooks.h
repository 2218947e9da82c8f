// The hooks of one rank's run (loop/hook.h), assembled once from its config
// in the order they run, and how far its loop trains. The one place that
// knows which features a run has.
#pragma once

#include <cstdint>
#include <string>

#include "store/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/loop/hook.h"

namespace granary {

struct LoopPlan {
  RunHooks hooks;
  // The loop trains epochs [state.start.epoch, end_epoch): --epochs, or
  // until a hook stops it (the tune probe).
  int64_t end_epoch = 0;
};

// `resumed`: the checkpoint the run continues (null: none), which must
// outlive the hooks. `checkpoint_run`: rank 0's id of the run that owns
// --checkpoint-dir ("" elsewhere).
StatusOr<LoopPlan> AssembleHooks(RankState& state, const Checkpoint* resumed, std::string checkpoint_run);

}  // namespace granary
