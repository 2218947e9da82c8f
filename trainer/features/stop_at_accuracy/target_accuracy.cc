#include "trainer/features/stop_at_accuracy/target_accuracy.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/json_text.h"
#include "trainer/clock.h"
#include "trainer/number_text.h"

namespace granary {
namespace {

// The figure an epoch that reached the target gets (and no other epoch).
constexpr const char* kSecondsToTarget = "seconds_to_target";

class TargetAccuracy : public RunHook {
 public:
  explicit TargetAccuracy(double target) : target_(target) {}

  // Where the accuracy reached is no more than always answering the eval
  // split's largest class scores (an imbalanced split): said beside it.
  static std::string Baseline(const EpochReport& report, double accuracy) {
    const std::optional<double> largest = report.Number("test_largest_class_share");
    if (!largest || accuracy > *largest + 0.01) return "";
    return " (but the eval split's largest class is " + FixedText(100 * *largest, 0) + "% of it: a model that "
           "always answers it scores " + FixedText(*largest, 4) + "; a target above that asks for more, and "
           "test_balanced_accuracy tells them apart)";
  }

  Status BeforeRun(RankState&) override {
    start_ = std::chrono::steady_clock::now();
    return Status::OK();
  }

  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent&, EpochReport* report) override {
    // The evaluation's figure (features/evaluation), the same on every rank.
    const std::optional<double> accuracy = report->Number("test_accuracy");
    if (!accuracy || *accuracy < target_) return Flow::kGoOn;
    const double seconds = SecondsSince(start_);
    report->Set(kSecondsToTarget, seconds);
    if (state.rank == 0) {
      state.observer.Note("--stop-at-accuracy " + NumberText(target_) + ": test accuracy " + FixedText(*accuracy, 4) +
                          " after epoch " + std::to_string(report->epoch) + ", " + FixedText(seconds, 1) +
                          " s after the first step; stopping" + Baseline(*report, *accuracy));
    }
    return Flow::kStop;
  }

  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override {
    if (state.rank != 0) return Status::OK();
    nlohmann::json result = {{"target", target_}, {"reached", false}};
    double best = 0;
    for (const EpochReport& r : *reports) {
      best = std::max(best, r.Number("test_accuracy").value_or(0));
      if (const std::optional<double> seconds = r.Number(kSecondsToTarget)) {
        result.update({{"reached", true}, {"epoch", r.epoch}, {"seconds", *seconds}});
      }
    }
    if (!result["reached"].get<bool>()) {
      state.observer.Note("--stop-at-accuracy " + NumberText(target_) + ": not reached in " +
                          std::to_string(reports->size()) + " epochs (best test accuracy " + FixedText(best, 4) +
                          ")");
    }
    state.observer.Result({"stop_at_accuracy", DumpJson(result), {}});
    return Status::OK();
  }

 private:
  const double target_;
  std::chrono::steady_clock::time_point start_;
};

class StopAtAccuracyFeature : public Feature {
 public:
  Status Validate(const TrainConfig& c) const override {
    const double target = c.optim.stop_at_accuracy;
    if (!(target >= 0 && target <= 1)) {
      return OutOfRange("--stop-at-accuracy", NumberText(target), "a test accuracy in (0, 1], or 0 for none");
    }
    if (target > 0 && c.data.synthetic) {
      return Status::InvalidArgument("--stop-at-accuracy " + NumberText(target) +
                                     " needs an evaluation: not with --synthetic (random batches)");
    }
    return Status::OK();
  }

  Status Preflight(const ResolvedRun& run, const ModelBytes&) const override {
    const TrainConfig& c = run.config;
    if (c.optim.stop_at_accuracy > 0 && c.data.eval_split.empty()) {
      return Status::InvalidArgument("--stop-at-accuracy " + NumberText(c.optim.stop_at_accuracy) +
                                     ": the run has no eval split to measure it on (the db has no test or val "
                                     "split, or --eval-split \"\")");
    }
    if (c.optim.stop_at_accuracy > 0 && run.workload.regression) {
      return Status::InvalidArgument("--stop-at-accuracy " + NumberText(c.optim.stop_at_accuracy) + ": the db's "
                                     "target '" + run.workload.target_field + "' is a number to predict, which has "
                                     "no accuracy (its test_rmse, test_mae and test_r2 are reported)");
    }
    return Status::OK();
  }

  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    const TrainConfig& c = state.run.config;
    if (c.optim.stop_at_accuracy <= 0 || c.data.synthetic || c.data.eval_split.empty()) {
      return std::unique_ptr<RunHook>();
    }
    return std::unique_ptr<RunHook>(std::make_unique<TargetAccuracy>(c.optim.stop_at_accuracy));
  }
};

}  // namespace

std::unique_ptr<Feature> MakeStopAtAccuracyFeature() { return std::make_unique<StopAtAccuracyFeature>(); }

}  // namespace granary
