#include "trainer/features/stop_at_accuracy/target_accuracy.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "base/json_text.h"
#include "trainer/clock.h"
#include "trainer/number_text.h"

namespace granary {
namespace {

class TargetAccuracy : public RunHook {
 public:
  explicit TargetAccuracy(double target) : target_(target) {}

  Status BeforeRun(RankState&) override {
    start_ = std::chrono::steady_clock::now();
    return Status::OK();
  }

  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent&, EpochReport* report) override {
    if (!report->evaluated || report->test_accuracy < target_) return Flow::kGoOn;
    report->target_reached = true;
    report->seconds_to_target = SecondsSince(start_);
    if (state.rank == 0) {
      state.observer.Note("--stop-at-accuracy " + NumberText(target_) + ": test accuracy " +
                          FixedText(report->test_accuracy, 4) + " after epoch " + std::to_string(report->epoch) +
                          ", " + FixedText(report->seconds_to_target, 1) + " s after the first step; stopping");
    }
    return Flow::kStop;
  }

  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override {
    if (state.rank != 0) return Status::OK();
    nlohmann::json result = {{"target", target_}, {"reached", false}};
    double best = 0;
    for (const EpochReport& r : *reports) {
      best = r.evaluated && r.test_accuracy > best ? r.test_accuracy : best;
      if (r.target_reached) result.update({{"reached", true}, {"epoch", r.epoch}, {"seconds", r.seconds_to_target}});
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
  Status Preflight(const ResolvedRun& run) const override {
    const TrainConfig& c = run.config;
    if (c.optim.stop_at_accuracy > 0 && c.data.eval_split.empty()) {
      return Status::InvalidArgument("--stop-at-accuracy " + NumberText(c.optim.stop_at_accuracy) +
                                     ": the run has no eval split to measure it on (the db has no test or val "
                                     "split, or --eval-split \"\")");
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
