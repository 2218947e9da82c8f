#include "trainer/features/evaluation/evaluation.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/names_text.h"
#include "trainer/comm/comm.h"
#include "trainer/eval/evaluate.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/number_text.h"

namespace granary {
namespace {

// The best test_acc and test_loss of the epochs this process ran, and the
// first epoch (1-based) to score each.
struct BestSoFar {
  double accuracy = -1, loss = 0;
  int accuracy_epoch = 0, loss_epoch = 0;

  void Add(int epoch, double new_loss, std::optional<double> new_accuracy) {
    if (new_accuracy && *new_accuracy > accuracy) accuracy = *new_accuracy, accuracy_epoch = epoch;
    if (loss_epoch == 0 || new_loss < loss) loss = new_loss, loss_epoch = epoch;
  }
};

// Where the held-out split's accuracy has fallen from its best by more than
// its sampling noise explains (two standard errors of a proportion over
// `samples`, at least a point), or its loss has risen to 1.25x its lowest, a
// line saying so: the model fits the training split at the cost of samples
// it has not seen, and the last epoch's model (the one saved) is not its
// best. "" otherwise.
std::string PastItsBestNote(const BestSoFar& best, double loss, std::optional<double> accuracy, double samples,
                            const TrainConfig& c) {
  std::string fell;
  int at = 0;
  if (accuracy) {
    const double p = (best.accuracy + *accuracy) / 2;
    const double noise = std::max(0.01, 2 * std::sqrt(p * (1 - p) / std::max(1.0, samples)));
    if (best.accuracy - *accuracy > noise) {
      at = best.accuracy_epoch;
      fell = "test_acc peaked at " + FixedText(best.accuracy, 4) + " after epoch " + std::to_string(at) +
             " and ended at " + FixedText(*accuracy, 4) + ", a fall beyond the noise of split '" + c.data.eval_split +
             "' (" + std::to_string(static_cast<uint64_t>(samples)) + " samples: " + FixedText(noise, 4) + ")";
    }
  }
  if (fell.empty() && loss > 1.25 * best.loss && best.loss > 0) {
    at = best.loss_epoch;
    fell = "test_loss was lowest after epoch " + std::to_string(at) + ", " + FixedText(best.loss, 4) +
           ", and ended at " + FixedText(loss, 4) + " (" + FixedText(loss / best.loss, 2) + "x)";
  }
  if (fell.empty()) return "";
  return fell + ": past epoch " + std::to_string(at) + " the model fits split '" + c.data.train_split +
         "' at the cost of samples it has not seen (overfitting)" +
         (c.output.save.empty() ? "" : ", and the model saved is the last epoch's") + "; --epochs " +
         std::to_string(at) + " stops there" +
         (c.optim.schedule == "constant" && c.optim.warmup_epochs == 0 ? " (the same run up to it)" : "") +
         ", and --dropout, --weight-decay or --augment hold it off";
}

class EvaluationHook : public RunHook {
 public:
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& event, EpochReport* report) override;

 private:
  // Said after the run's last evaluation where it is past its best (not
  // under --prune, where the accuracy a prune costs is the trade asked for).
  void NotePastItsBest(int epoch, double loss, std::optional<double> accuracy, double samples, const TrainConfig& c,
                       EpochReport* r) {
    best_.Add(epoch, loss, accuracy);
    const std::string note = PastItsBestNote(best_, loss, accuracy, samples, c);
    if (!note.empty() && c.shrink.prune == 0) r->lines_if_last.push_back("train: " + note);
  }

  BestSoFar best_;
};

// What the last evaluation of an imbalanced split says beyond its accuracy:
// each class's recall and, where the model answers one class for nearly
// every sample and scores no better than that class's share, that it has
// learnt to answer the largest class.
std::string ImbalanceNote(const ClassFigures& f, double accuracy, const std::string& split,
                          const std::string& class_weights, const Manifest& manifest) {
  std::string recalls;
  std::vector<std::string> absent;
  int shown = 0;
  for (size_t c = 0; c < f.recall.size(); ++c) {
    if (std::isnan(f.recall[c])) {
      absent.push_back("'" + manifest.ClassName(c) + "'");
    } else if (shown < 12) {
      recalls += (shown++ ? ", " : "") + manifest.ClassName(c) + " " + FixedText(f.recall[c], 2);
    }
  }
  if (shown == 12) recalls += ", ...";
  const std::string largest = "'" + manifest.ClassName(f.largest) + "'";
  std::string note = "split '" + split + "' is imbalanced (" + largest + " is " +
                     FixedText(100 * f.largest_share, 0) + "% of it): recall per class " + recalls +
                     "; balanced accuracy " + FixedText(f.balanced_accuracy, 4);
  if (!absent.empty()) note += " (it holds no sample of " + NamesText(absent) + ": its scores say nothing of them)";
  if (f.most_answered == f.largest && f.most_answered_share >= 0.9 && accuracy <= f.largest_share + 0.01) {
    note += ". The model answers " + largest + " for " + FixedText(100 * f.most_answered_share, 0) +
            "% of the samples: its accuracy " + FixedText(accuracy, 4) + " is what always answering " + largest +
            " scores, and it has learnt little else";
  }
  return note + (class_weights == "none" ? " (--class-weights balanced weighs the loss against the imbalance)" : "");
}

StatusOr<Flow> EvaluationHook::AfterEpoch(RankState& state, const EpochEvent& event, EpochReport* r) {
  const TrainConfig& c = state.run.config;
  const LoaderOptions eval = EvalLoaderOptions(c.data, state.run.workload, c.model.channels_last);
  StatusOr<EvalResult> result =
      Evaluate(*state.run.db, eval, *state.model.net, state.model.precision, state.rank, c.World());
  if (!result.ok()) return result.status().WithContext("model " + c.model.name);
  for (const std::string& reason : result->skipped) {
    state.observer.Note("rank " + std::to_string(state.rank) + ": evaluation: skipped corrupt " + reason);
  }
  // The sums, then a classifier's counts per class: every rank sends as many, whatever it evaluated.
  std::vector<double> values = {result->loss_sum, static_cast<double>(result->correct),
                                static_cast<double>(result->samples), result->squared_error_sum,
                                result->absolute_error_sum, result->target_sum, result->target_squared_sum};
  const size_t classes = state.run.workload.regression ? 0 : static_cast<size_t>(state.run.workload.outputs);
  for (std::vector<uint64_t>* counts : {&result->class_samples, &result->class_correct, &result->class_predicted}) {
    counts->resize(classes);
    values.insert(values.end(), counts->begin(), counts->end());
  }
  torch::Tensor sums = torch::tensor(values, torch::kFloat64);
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
    NotePastItsBest(event.epoch + 1, f.loss, std::nullopt, samples, c, r);
    return Flow::kGoOn;
  }
  const double loss = sums[0].item<double>() / std::max(1.0, samples);
  const double accuracy = sums[1].item<double>() / std::max(1.0, samples);
  r->Set("test_loss", loss);
  r->Set("test_accuracy", accuracy);
  r->Set("test_samples", static_cast<uint64_t>(samples));
  r->line_part += "  test_loss " + FixedText(loss, 4) + "  test_acc " + FixedText(accuracy, 4);
  EvalResult all;
  const torch::Tensor counts = sums.narrow(0, 7, static_cast<int64_t>(3 * classes)).to(torch::kLong).contiguous();
  const int64_t* n = counts.data_ptr<int64_t>();
  all.class_samples.assign(n, n + classes);
  all.class_correct.assign(n + classes, n + 2 * classes);
  all.class_predicted.assign(n + 2 * classes, n + 3 * classes);
  const ClassFigures f = ClassFiguresOf(all);
  r->Set("test_balanced_accuracy", f.balanced_accuracy);
  r->Set("test_largest_class_share", f.largest_share);  // what always answering that class scores
  if (f.imbalanced) r->line_part += "  bal_acc " + FixedText(f.balanced_accuracy, 4);
  NotePastItsBest(event.epoch + 1, loss, accuracy, samples, c, r);
  if (f.imbalanced) {  // said after the run's last evaluation, whichever epoch ends it
    r->lines_if_last.push_back("train: " + ImbalanceNote(f, accuracy, c.data.eval_split, c.optim.class_weights,
                                                         state.run.db->manifest()));
  }
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
