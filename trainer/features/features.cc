#include "trainer/features/features.h"

#include <memory>
#include <utility>

#include "trainer/features/checkpoints/run_checkpointer.h"
#include "trainer/features/evaluation/evaluation.h"
#include "trainer/features/int8/int8_export.h"
#include "trainer/features/progress/progress.h"
#include "trainer/features/prune/pruner.h"
#include "trainer/features/save/saved_model.h"
#include "trainer/features/stop_at_accuracy/target_accuracy.h"
#include "trainer/features/tune_probe/probe_window.h"

namespace granary {
namespace {

// The order is the order of every call (loop/hook.h): the prune before the
// figures of its epoch; the evaluation before the target it is measured
// against; the checkpointer last of those that write, as no collective may
// follow its AfterRun; the probe's window last of all. A new feature is a
// line here.
Features Register() {
  Features all;
  all.push_back(MakePruneFeature());
  all.push_back(MakeEvaluationFeature());
  all.push_back(MakeStopAtAccuracyFeature());
  all.push_back(MakeProgressFeature());
  all.push_back(MakeSavedModelFeature());
  all.push_back(MakeInt8ExportFeature());
  all.push_back(MakeCheckpointsFeature());
  all.push_back(MakeTuneProbeFeature());
  return all;
}

}  // namespace

const Features& AllFeatures() {
  static const Features* all = new Features(Register());  // never destroyed: used until exit
  return *all;
}

Status ValidateRun(const TrainConfig& config, int cores) {
  GRANARY_RETURN_IF_ERROR(config.Validate(cores));
  for (const std::unique_ptr<Feature>& feature : AllFeatures()) GRANARY_RETURN_IF_ERROR(feature->Validate(config));
  return Status::OK();
}

StatusOr<RunHooks> AssembleHooks(RankState& state) {
  const bool measuring = state.run.config.data.probe_s > 0;
  RunHooks hooks;
  for (const std::unique_ptr<Feature>& feature : AllFeatures()) {
    if (measuring && !feature->InMeasurement()) continue;
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<RunHook> hook, feature->Hook(state));
    if (hook) hooks.push_back(std::move(hook));
  }
  return hooks;
}

}  // namespace granary
