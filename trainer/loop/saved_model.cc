#include "trainer/loop/saved_model.h"

#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/script.h"

namespace granary {

Status SavedModel::AfterRun(RankState& state, std::vector<EpochReport>*) {
  const ResolvedRun& run = state.run;
  return SaveTorchScript(*state.model.net, run.config.output.save,
                         ModelCardOf(run.config, run.workload, run.db->manifest()));
}

}  // namespace granary
