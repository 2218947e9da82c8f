// --stop-at-accuracy A: the run stops after the first evaluation whose test
// accuracy is at or above A, and that epoch's report says how long it took
// (seconds_to_target). A hook of every rank after the evaluation's: the
// accuracy is the ranks' sum, so every rank stops at the same epoch. Rank 0
// notes it, and notes a run that ends without reaching it. Training thread
// only.
#pragma once

#include <chrono>

#include "trainer/loop/hook.h"

namespace granary {

class TargetAccuracy : public RunHook {
 public:
  explicit TargetAccuracy(double target) : target_(target) {}

  Status BeforeRun(RankState& state) override;
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override;
  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override;

 private:
  const double target_;
  std::chrono::steady_clock::time_point start_;
  bool reached_ = false;
};

}  // namespace granary
