// A feature's part in a rank's run (features/feature.h), called by the loop
// (loop/rank.cc) at fixed points: before the first step, after every
// optimizer step, after every epoch's report is closed, after the last
// epoch. The loop knows no feature: each feature's hook lives in its folder
// under features/, and features/features.cc assembles the hooks once, in
// the order they run. Adding a feature adds a folder and a line there, not a
// branch in the loop.
//
// What a hook may do:
// - Add to the epoch's report (AfterEpoch): later hooks see what earlier
//   ones added (the evaluation sees the pruned model, the checkpoint the
//   evaluated one).
// - Stop training (Flow::kStop from AfterStep or AfterEpoch): the other
//   hooks of that call still run, then the loop takes no further step (an
//   epoch stopped inside gets no report) and goes to AfterRun. Every rank
//   must return the same flow at the same call, so decide it from what
//   every rank shares (a collective's result, a figure the ranks summed),
//   never from a local one (checked across ranks where asked:
//   loop/same_flow.h).
// - Run a collective (Comm): then it is a hook of every rank, and every rank
//   calls it at the same point. A hook assembled for some ranks only (rank
//   0's progress lines and files) runs none.
// - Change the model (the pruner): it re-attaches the gradient sync and
//   refreshes the state's step parts itself.
// Hooks run on the training thread, in assembly order, each call before the
// next hook's; an error ends the run with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "trainer/loop/step.h"
#include "trainer/report/observer.h"

namespace granary {

class Loader;
struct DataParallel;
struct RankModel;
struct ResolvedRun;

// Where a rank's run starts: the beginning, or where a resumed run left off
// (features/checkpoints/resume_point.h fills it in).
struct RankStart {
  uint64_t epoch = 0;        // 0-based
  uint64_t position = 0;     // samples of that epoch already trained (the loader's position)
  int64_t global_step = 0;   // optimizer steps already taken
  double loss_sum = 0;       // this rank's share of that epoch's training loss x samples so far
  double samples = 0;        // and of its samples
  bool resumed = false;      // false: the beginning
};

// What a hook may read and change of the rank's run; the loop owns it and
// every part outlives the hooks.
struct RankState {
  const ResolvedRun& run;
  int rank;
  RunObserver& observer;
  RankModel& model;
  DataParallel& dp;
  torch::optim::Optimizer& optimizer;
  Loader& train;        // the training split's loader (its shape even with --synthetic)
  StepParts parts;      // what each step works on (DataParallel::Parts)
  RankStart start;      // where the run starts
  int64_t global_step;  // optimizer steps so far
  // This rank's totals over the run so far (loop/epoch_figures.h).
  double samples_trained = 0;  // by this run (a resumed part not counted)
  double compute_seconds = 0;  // forward, backward and optimizer step
  // Check at every hook call that every rank's hooks returned the same flow
  // (loop/same_flow.h): builds with asserts, or GRANARY_CHECK_FLOW=1.
  bool check_flow = false;
};

// Where an epoch stands on this rank, as of the last step.
struct EpochTally {
  std::chrono::steady_clock::time_point start;
  double loss_sum = 0;        // training loss x samples, the epoch so far (a resumed part included)
  double samples = 0;
  double samples_before = 0;  // of those, trained before this run (not in samples/s)
};

struct StepEvent {
  int epoch = 0;             // 0-based
  uint64_t step = 0;         // optimizer steps so far in the epoch
  uint64_t steps = 0;        // optimizer steps in the epoch
  bool epoch_end = false;    // the epoch's last step
  double lr = 0;             // the step's learning rate
  StepResult result;         // this rank's step
  const EpochTally* tally = nullptr;
};

struct EpochEvent {
  int epoch = 0;      // 0-based
  bool last = false;  // the run's last configured epoch
};

enum class Flow { kGoOn, kStop };

class RunHook {
 public:
  virtual ~RunHook() = default;
  // Before the first step (notes about what the run will do).
  virtual Status BeforeRun(RankState&) { return Status::OK(); }
  virtual StatusOr<Flow> AfterStep(RankState&, const StepEvent&) { return Flow::kGoOn; }
  // The epoch's report as the ranks' sums closed it; a hook adds to it.
  virtual StatusOr<Flow> AfterEpoch(RankState&, const EpochEvent&, EpochReport*) { return Flow::kGoOn; }
  // After training ended (its epochs done or a hook stopped it), with the
  // run's reports so far, which a hook may replace (the tune probe's window).
  virtual Status AfterRun(RankState&, std::vector<EpochReport>*) { return Status::OK(); }
  // True for a hook that ends the run itself (with kStop): the loop then
  // trains past --epochs until it does (the tune probe's window).
  virtual bool EndsTheRun() const { return false; }
};

using RunHooks = std::vector<std::unique_ptr<RunHook>>;

}  // namespace granary
