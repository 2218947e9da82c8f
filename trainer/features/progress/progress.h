// Rank 0's running account of the run, a hook of rank 0 alone (no
// collective): after every optimizer step the step's report (progress lines,
// --metrics), after every epoch the weights hash of its report (equal runs
// have equal hashes; the model as pruned and evaluated). It runs in train
// --tune's measurement too. Training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trainer/features/feature.h"

namespace granary {

std::unique_ptr<Feature> MakeProgressFeature();

// XXH64 over the parameters' values in order, "xxh64:...".
std::string WeightsHash(const std::vector<torch::Tensor>& params);

}  // namespace granary
