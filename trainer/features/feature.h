// A feature of a run: evaluation, checkpoints, pruning, INT8 export, ...
// Each lives in a folder of its own under features/ and owns, behind this
// one interface, what it adds to a run: its flags' bounds, its checks
// before any rank starts, the files it writes, and its hook (loop/hook.h) on
// each rank, which adds its figures to the epoch's report and its result to
// --json (RunObserver::Result). The run (run.cc), a rank's assembly
// (run_rank.cc) and the hooks' order (features.cc) iterate over the
// features; none is named outside its folder but in features.cc's one
// registration line.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "store/output_path.h"
#include "trainer/config/config.h"
#include "trainer/loop/hook.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"

namespace granary {

class Feature {
 public:
  virtual ~Feature() = default;

  // Its flags (fields of the config it alone reads) within their bounds and
  // consistent with the rest of the config, checked with the config's own
  // (ValidateRun, features.h) by the launcher and by every rank, before any
  // work: InvalidArgument naming the flag.
  virtual Status Validate(const TrainConfig& config) const { return Status::OK(); }

  // Before any rank starts, once, by the process that answers for the run
  // (the launcher, or rank 0 of a job torchrun, mpirun or srun started):
  // what can be known wrong now (a flag this run cannot honour, a disk
  // without room for what it writes: `model` is what the model holds) is an
  // error; what the user should know, a line on stderr.
  virtual Status Preflight(const ResolvedRun& run, const ModelBytes& model) const { return Status::OK(); }

  // The files it will write, added to `outputs`; every output of the run is
  // checked together before any rank starts (store/output_path.h).
  virtual void Outputs(const TrainConfig& config, std::vector<OutputPath>* outputs) const {}

  // Whether it runs in train --tune's measurement (a probe keeps nothing: no
  // evaluation, checkpoint, pruning or model).
  virtual bool InMeasurement() const { return false; }

  // Its hook on this rank (state.rank), or null when the run does not use it
  // there.
  virtual StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const = 0;
};

using Features = std::vector<std::unique_ptr<Feature>>;

}  // namespace granary
