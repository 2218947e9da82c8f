#include "trainer/features/evaluation/evaluation.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainer/comm/comm.h"
#include "trainer/eval/evaluate.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/number_text.h"

namespace granary {
namespace {

class EvaluationHook : public RunHook {
 public:
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override;
};

StatusOr<Flow> EvaluationHook::AfterEpoch(RankState& state, const EpochEvent&, EpochReport* r) {
  const TrainConfig& c = state.run.config;
  const LoaderOptions eval = EvalLoaderOptions(c.data, state.run.workload, c.model.channels_last);
  StatusOr<EvalResult> result =
      Evaluate(*state.run.db, eval, *state.model.net, state.model.precision, state.rank, c.World());
  if (!result.ok()) return result.status().WithContext("model " + c.model.name);
  for (const std::string& reason : result->skipped) {
    state.observer.Note("rank " + std::to_string(state.rank) + ": evaluation: skipped corrupt " + reason);
  }
  torch::Tensor sums = torch::tensor({result->loss_sum, static_cast<double>(result->correct),
                                      static_cast<double>(result->samples), result->squared_error_sum,
                                      result->absolute_error_sum, result->target_sum, result->target_squared_sum},
                                     torch::kFloat64);
  GRANARY_RETURN_IF_ERROR(state.dp.comm->AllReduceSum(sums));
  const double samples = sums[2].item<double>();
  if (state.run.workload.regression) {
    EvalResult all;
    all.samples = static_cast<uint64_t>(samples);
    all.squared_error_sum = sums[3].item<double>();
    all.absolute_error_sum = sums[4].item<double>();
    all.target_sum = sums[5].item<double>();
    all.target_squared_sum = sums[6].item<double>();
    const RegressionFigures f = RegressionFiguresOf(all, state.run.workload.target_std);
    r->Set("test_loss", f.loss);
    r->Set("test_rmse", f.rmse);
    r->Set("test_mae", f.mae);
    r->Set("test_r2", f.r2);
    r->Set("test_samples", all.samples);
    r->line_part += "  test_loss " + FixedText(f.loss, 4) + "  test_rmse " + NumberText(f.rmse) + "  test_mae " +
                    NumberText(f.mae) + "  test_r2 " + FixedText(f.r2, 4);
    return Flow::kGoOn;
  }
  const double loss = sums[0].item<double>() / std::max(1.0, samples);
  const double accuracy = sums[1].item<double>() / std::max(1.0, samples);
  r->Set("test_loss", loss);
  r->Set("test_accuracy", accuracy);
  r->Set("test_samples", static_cast<uint64_t>(samples));
  r->line_part += "  test_loss " + FixedText(loss, 4) + "  test_acc " + FixedText(accuracy, 4);
  return Flow::kGoOn;
}

class EvaluationFeature : public Feature {
 public:
  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    const TrainConfig& c = state.run.config;
    if (c.data.synthetic || c.data.eval_split.empty()) return std::unique_ptr<RunHook>();
    return std::unique_ptr<RunHook>(std::make_unique<EvaluationHook>());
  }
};

}  // namespace

std::unique_ptr<Feature> MakeEvaluationFeature() { return std::make_unique<EvaluationFeature>(); }

}  // namespace granary
