// Rank 0's running account of the run, a hook of rank 0 alone (no
// collective): after every optimizer step the step's report (progress lines,
// --metrics), after every epoch the weights hash of its report (equal runs
// have equal hashes; the model as pruned and evaluated). Training thread only.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/loop/hook.h"

namespace granary {

class ProgressHook : public RunHook {
 public:
  StatusOr<Flow> AfterStep(RankState& state, const StepEvent& step) override;
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override;
};

// XXH64 over the parameters' values in order, "xxh64:...".
std::string WeightsHash(const std::vector<torch::Tensor>& params);

}  // namespace granary
