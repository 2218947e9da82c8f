// Evaluation of a model on a split (mean loss and accuracy), the samples
// shared between ranks. Runs on the calling thread with its own loader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/script.h>

#include "loader/loader.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/eval/forward.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"

namespace granary {

struct EvalResult {
  double loss_sum = 0;  // summed over the samples (classes: cross-entropy)
  uint64_t correct = 0;
  uint64_t samples = 0;
  // A regression target's: the squared and absolute errors, the targets and
  // their squares summed (in its units), what RegressionFiguresOf makes
  // figures of.
  double squared_error_sum = 0, absolute_error_sum = 0, target_sum = 0, target_squared_sum = 0;
  // A classifier's, per class (the model's outputs): the samples of the
  // class, those of them answered right, and the samples answered as it.
  std::vector<uint64_t> class_samples, class_correct, class_predicted;
  // Why each record this rank skipped was skipped (--skip-corrupt), for the
  // caller to report: the observer in training, stderr in --eval-only.
  std::vector<std::string> skipped;
};

// A regression target's figures from an evaluation's sums (possibly summed
// over ranks): the loss as training has it (the mean squared error in units
// of `target_std`), the root mean squared and the mean absolute error in the
// target's units, and R^2 (1 - the squared errors over the targets' squared
// deviations from their mean; 0 where the targets do not vary).
struct RegressionFigures {
  double loss = 0, rmse = 0, mae = 0, r2 = 0;
};
RegressionFigures RegressionFiguresOf(const EvalResult& sums, double target_std);

// A classifier's figures per class from an evaluation's counts (possibly
// summed over ranks): the balanced accuracy (the mean of the classes'
// recalls, of the classes with samples), whether the split is imbalanced
// (its largest class at least twice its smallest), the largest class and
// its share of the samples, the class answered most and its share of the
// answers. A model that answers one class for nearly every sample of an
// imbalanced split scores that class's share as its accuracy while it has
// learnt nothing: these figures tell it.
struct ClassFigures {
  double balanced_accuracy = 0;
  bool imbalanced = false;
  int64_t largest = -1, most_answered = -1;
  double largest_share = 0, most_answered_share = 0;
  std::vector<double> recall;  // per class; NaN for a class without samples
};
ClassFigures ClassFiguresOf(const EvalResult& sums);

// Evaluate, of any forward: a TorchScript module, an INT8 one. The caller
// holds the grad mode and the model's eval mode.
StatusOr<EvalResult> EvaluateForward(const DbReader& db, LoaderOptions options, const ForwardFn& forward, int rank = 0,
                                     int world = 1);

// Evaluates rank `rank`'s share of `options.split` (of `world` ranks: every
// sample is evaluated by exactly one rank, in order, unaugmented; options'
// sampler and augmentation are overridden). Sum the ranks' results for the
// split's. Errors from the loader or LibTorch come back as Status.
StatusOr<EvalResult> Evaluate(const DbReader& db, LoaderOptions options, Classifier& model, const Precision& precision,
                              int rank = 0, int world = 1);

// `module` on all of `data.eval_split`, in batches of kEvalBatchSize, the
// caller holding the grad mode; `*first` (if not null and undefined) becomes
// a copy of the first input batch (what InferenceRates times).
StatusOr<EvalResult> EvaluateModule(const DbReader& db, const DataConfig& data, const Workload& workload,
                                    torch::jit::Module& module, torch::Tensor* first = nullptr);

}  // namespace granary
