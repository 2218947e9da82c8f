// The epoch's evaluation, a hook of every rank after every epoch (a
// collective): each rank evaluates its share of the eval split, in order,
// and the ranks' sums give the report's test loss and accuracy. Assembled
// only when the run names an eval split and trains on real data. Training
// thread only.
#pragma once

#include "trainer/loop/hook.h"

namespace granary {

class EvaluationHook : public RunHook {
 public:
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override;
};

}  // namespace granary
