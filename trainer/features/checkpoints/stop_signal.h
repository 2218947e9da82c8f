// A stop asked of a rank that keeps checkpoints, by SIGTERM (a scheduler's
// preemption or time limit, scancel, the launcher passing on its own),
// SIGINT (Ctrl-C), SIGHUP (a closed terminal), or SIGUSR1 or SIGUSR2 (what a
// scheduler sends ahead of a time limit to have the job save: Slurm's
// --signal=USR1@120, submitit's USR2): the signal is noted, not
// obeyed at once, so that the ranks stop together after a step and save it
// (run_checkpointer.h); a second one from the same sender ends the process
// at once, as the signal would have (one from another sender is the same
// stop come by another way: a terminal's Ctrl-C and a scheduler's stop reach
// every process, and the launcher passes its own on too).
#pragma once

namespace granary {

// Installs the handlers (once; later calls do nothing).
void CatchStopSignals();

// The stop signal noted in this process, or 0.
int StopSignal();

// The stop the ranks agreed on (every rank stops at the same step, whichever
// got the signal), kept for the process's exit status; 0: none.
void SetAgreedStop(int sig);
int AgreedStop();

}  // namespace granary
