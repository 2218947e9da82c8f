// A collective that timed out because this process was stopped: a run
// stopped whole (Ctrl-Z, Slurm's scontrol suspend, SIGSTOP to its process
// group) longer than --timeout finds every rank's wait past its limit when it
// goes on, and Gloo's words (`Application timeout caused pair closure`,
// `Timed out waiting 5000ms for recv operation`) blame no one.
#pragma once

#include "base/status.h"

namespace granary {

// From now on, note when this process goes on after a stop (SIGCONT). Once
// per process; any thread.
void NoteContinues();

// `s` as it is, unless it is a timeout and this process went on from a stop
// (noted by NoteContinues) at most `timeout_s` + 10 s ago, or is going on
// now: then FailedPrecondition, Gloo's words followed by what happened and
// what to do (`--resume latest`, a larger --timeout).
Status ExplainStopped(Status s, int timeout_s);

}  // namespace granary
