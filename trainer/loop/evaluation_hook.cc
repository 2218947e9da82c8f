#include "trainer/loop/evaluation_hook.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainer/comm/comm.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/evaluate.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"

namespace granary {

StatusOr<Flow> EvaluationHook::AfterEpoch(RankState& state, const EpochEvent&, EpochReport* r) {
  const TrainConfig& c = state.run.config;
  const LoaderOptions eval = EvalLoaderOptions(c.data, state.run.workload, c.model.channels_last);
  StatusOr<EvalResult> result =
      Evaluate(*state.run.db, eval, *state.model.net, state.model.precision, state.rank, c.World());
  if (!result.ok()) return result.status().WithContext("model " + c.model.name);
  for (const std::string& reason : result->skipped) {
    state.observer.Note("rank " + std::to_string(state.rank) + ": evaluation: skipped corrupt " + reason);
  }
  torch::Tensor sums = torch::tensor(
      {result->loss_sum, static_cast<double>(result->correct), static_cast<double>(result->samples)}, torch::kFloat64);
  GRANARY_RETURN_IF_ERROR(state.dp.comm->AllReduceSum(sums));
  const double samples = sums[2].item<double>();
  r->evaluated = true;
  r->test_loss = sums[0].item<double>() / std::max(1.0, samples);
  r->test_accuracy = sums[1].item<double>() / std::max(1.0, samples);
  r->test_samples = static_cast<uint64_t>(samples);
  return Flow::kGoOn;
}

}  // namespace granary
