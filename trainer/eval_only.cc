#include "trainer/eval_only.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/cli.h"
#include "base/file.h"
#include "base/json_text.h"
#include "loader/loader.h"
#include "trainer/eval/evaluate.h"
#include "trainer/eval/inference_rates.h"
#include "trainer/loop/loader_options.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/quantize.h"
#include "trainer/models/registry.h"
#include "trainer/number_text.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

int Fail(const Status& s) { return PrintFailure("train", s); }

struct Evaluation {
  EvalResult result;
  double samples_per_s = 0;
  int int8_layers = 0;
  int threads = 0;
};

StatusOr<Evaluation> EvaluateSaved(const ResolvedRun& run) {
  const TrainConfig& c = run.config;
  Evaluation out;
  out.threads = c.dist.threads > 0 ? c.dist.threads : UsableCpuCount();
  at::set_num_threads(std::max(1, out.threads));
  UseInt8Engine().status().PermitUncheckedError();  // an INT8 model's kernels; an fp32 model needs none
  torch::jit::Module module;
  GRANARY_RETURN_IF_ERROR(CatchTorch(("--model " + c.model.name).c_str(), [&] {
    module = torch::jit::load(c.model.name);
    module.eval();
  }));
  out.int8_layers = CountInt8Layers(module);
  torch::NoGradGuard no_grad;
  torch::Tensor first;
  StatusOr<EvalResult> result = EvaluateModule(*run.db, c.data, run.workload, module, &first);
  if (!result.ok()) return result.status().WithContext("--eval-only: model " + c.model.name);
  out.result = result.value();
  if (first.defined()) {
    GRANARY_RETURN_IF_ERROR(CatchTorch("--eval-only: timing inference", [&] {
      out.samples_per_s = InferenceRates({ModuleForward(module)}, first)[0];
    }));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& EvalOnlyFlags() {
  static const std::vector<std::string> flags = {
      "--db",     "--eval-split", "--input-field", "--loader-threads", "--prefetch", "--skip-corrupt",
      "--mean",   "--std",        "--model",       "--threads",        "--timeout",  "--eval-only",
      "--json"};
  return flags;
}

int RunEvalOnly(TrainConfig config, bool json, const std::vector<std::string>& given) {
  std::string unused;
  for (const std::string& flag : given) {
    if (std::find(EvalOnlyFlags().begin(), EvalOnlyFlags().end(), flag) == EvalOnlyFlags().end()) {
      unused += (unused.empty() ? "" : ", ") + flag;
    }
  }
  if (!unused.empty()) {
    return Fail(Status::InvalidArgument("--eval-only does not use " + unused +
                                        " (it evaluates --model on --eval-split and writes nothing)"));
  }
  if (!IsModelFile(config.model.name)) {
    return Fail(Status::InvalidArgument("--eval-only evaluates a saved model: give --model FILE.pt (not '" +
                                        config.model.name + "')"));
  }
  if (Status valid = config.ValidateEvaluation(UsableCpuCount()); !valid.ok()) return Fail(valid);
  StatusOr<ResolvedRun> resolved = ResolveRun(std::move(config), Environment::OfProcess());
  if (!resolved.ok()) return Fail(resolved.status());
  const ResolvedRun& run = resolved.value();
  const TrainConfig& c = run.config;
  if (c.data.eval_split.empty()) {
    return Fail(Status::InvalidArgument("--eval-only: " + c.data.db +
                                        " has no test or val split to evaluate on; name one with --eval-split"));
  }
  if (Status splits = CheckSplits(run.db->manifest(), c.data.db, c.data, SplitUse::kEvaluate); !splits.ok()) {
    return Fail(splits);
  }
  // The model takes the db's input and gives a logit per class (bounded by --timeout).
  if (Status fits = CheckModelFits(c, run.workload, ModelUse::kInfer); !fits.ok()) {
    return Fail(fits.WithContext("--eval-only"));  // (past --timeout main exits at once: DryForwardLeftRunning)
  }
  WarnOfSavedInputShape(c, run.workload);
  StatusOr<Evaluation> e = EvaluateSaved(run);
  if (!e.ok()) return Fail(e.status());
  const EvalResult& r = e->result;
  const double n = static_cast<double>(std::max<uint64_t>(r.samples, 1));
  for (const std::string& reason : r.skipped) {
    std::fprintf(stderr, "train: evaluation: skipped corrupt %s\n", Printable(reason).c_str());
  }
  // What the model scored: accuracy and loss, or a regression target's loss, rmse and r2.
  std::vector<std::pair<std::string, double>> scores = {{"accuracy", static_cast<double>(r.correct) / n},
                                                        {"loss", r.loss_sum / n}};
  if (run.workload.regression) {
    const RegressionFigures f = RegressionFiguresOf(r, run.workload.target_std);
    scores = {{"loss", f.loss}, {"rmse", f.rmse}, {"mae", f.mae}, {"r2", f.r2}};
  } else if (const ClassFigures f = ClassFiguresOf(r); f.imbalanced || json) {
    scores.push_back({"balanced_accuracy", f.balanced_accuracy});  // (on the line where the split is imbalanced)
  }
  if (json) {
    nlohmann::json out = {{"model", c.model.name}, {"db", c.data.db}, {"split", c.data.eval_split},
                          {"samples", r.samples}, {"skipped", r.skipped.size()}};
    for (const auto& [name, value] : scores) out[name] = value;
    out.update({{"samples_per_s", e->samples_per_s},
                {"threads", e->threads},
                {"batch_size", kEvalBatchSize},
                {"int8_layers", e->int8_layers}});
    std::cout << DumpJson(out) << '\n';
    FlushStdoutNoting();
  } else {
    std::string scored;
    for (const auto& [name, value] : scores) {
      const std::string shown = name == "accuracy" ? "acc" : name == "balanced_accuracy" ? "bal_acc" : name;
      scored += "  " + shown + " " + FixedText(value, 4);
    }
    std::printf("eval %s on %s split %s: %llu samples%s  samples/s %.0f  (%s, %d thread%s)\n", c.model.name.c_str(),
                c.data.db.c_str(), c.data.eval_split.c_str(), static_cast<unsigned long long>(r.samples),
                scored.c_str(), e->samples_per_s, e->int8_layers > 0 ? "int8" : "fp32", e->threads,
                e->threads == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace granary
