#include "trainer/loop/hooks.h"

#include <limits>
#include <utility>

#include "trainer/loop/data_parallel.h"
#include "trainer/loop/evaluation_hook.h"
#include "trainer/loop/int8_export.h"
#include "trainer/loop/probe_window.h"
#include "trainer/loop/progress.h"
#include "trainer/loop/pruner.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/loop/run_checkpointer.h"
#include "trainer/loop/saved_model.h"
#include "trainer/loop/target_accuracy.h"

namespace granary {

StatusOr<LoopPlan> AssembleHooks(RankState& state, const Checkpoint* resumed, std::string checkpoint_run) {
  const TrainConfig& c = state.run.config;
  const bool rank0 = state.rank == 0;
  // train --tune's measurement trains until its window closes, and keeps
  // nothing: no evaluation, prune, checkpoint or model.
  const bool probe = c.data.probe_s > 0;
  const bool real_data = !c.data.synthetic;
  LoopPlan plan;
  plan.end_epoch = probe ? std::numeric_limits<int64_t>::max() : c.optim.epochs;
  RunHooks& hooks = plan.hooks;
  // The order is the order of every call (loop/hook.h): the prune before the
  // figures of its epoch; the checkpointer last of those that write, as no
  // collective may follow its AfterRun; the probe's window last of all.
  if (resumed != nullptr && rank0) hooks.push_back(std::make_unique<ResumeNotes>(*resumed));
  if (!probe) {
    StatusOr<std::unique_ptr<Pruner>> pruner = Pruner::Create(c, *state.model.net, state.model.channels_at_build);
    if (!pruner.ok()) return pruner.status();
    if (pruner.value()) hooks.push_back(std::make_unique<PruneHook>(std::move(pruner).value()));
  }
  if (!probe && real_data && !c.data.eval_split.empty()) {
    hooks.push_back(std::make_unique<EvaluationHook>());
    if (c.optim.stop_at_accuracy > 0) hooks.push_back(std::make_unique<TargetAccuracy>(c.optim.stop_at_accuracy));
  }
  if (rank0) hooks.push_back(std::make_unique<ProgressHook>());
  if (!probe && rank0 && !c.output.save.empty()) hooks.push_back(std::make_unique<SavedModel>());
  if (!probe && rank0 && real_data && c.shrink.quantize == "int8") hooks.push_back(std::make_unique<Int8Export>());
  if (!probe && real_data && !c.checkpoint.dir.empty()) {
    hooks.push_back(std::make_unique<RunCheckpointer>(c, state.run.db->manifest().content_hash,
                                                      std::move(checkpoint_run), state.rank, *state.dp.comm,
                                                      *state.model.net, state.optimizer, state.observer));
  }
  if (probe) hooks.push_back(std::make_unique<ProbeWindow>(c.data.probe_s));
  return plan;
}

}  // namespace granary
