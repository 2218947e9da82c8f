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

#include <string>

namespace granary {

// Installs the handlers (once; later calls do nothing).
void CatchStopSignals();

// What train says when a stop signal `sig` ends a run that keeps no
// checkpoints: `train: stopped by SIGTERM; nothing of the run was kept (...)`.
std::string NothingKeptLine(int sig);

// What train says when a stop signal `sig` ends a run that saved the step it
// reached in `saved`: `train: stopped by SIGINT; the step it reached is saved
// in ck/step-...ckpt: add --resume latest to go on from it`.
std::string SavedLine(int sig, const std::string& saved);

// What train says when a stop signal `sig` ended a run that keeps checkpoints
// before its ranks saved a step (a second Ctrl-C: the ranks ended at once);
// `newest`: the checkpoint that is still the newest, or "".
std::string NotSavedLine(int sig, const std::string& newest);

// For a run of one process without --checkpoint-dir: a stop signal ends it at
// once, as before, but saying so (NothingKeptLine) and with 128 + the signal,
// as train's launcher of several ranks ends. Once; later calls do nothing.
void SayStopsEndTheRun();

// The stop signal noted in this process, or 0.
int StopSignal();

// The stop the ranks agreed on (every rank stops at the same step, whichever
// got the signal), kept for the process's exit status; 0: none.
void SetAgreedStop(int sig);
int AgreedStop();

}  // namespace granary
