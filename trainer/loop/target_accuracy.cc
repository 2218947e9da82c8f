#include "trainer/loop/target_accuracy.h"

#include <string>

#include "trainer/number_text.h"

namespace granary {

Status TargetAccuracy::BeforeRun(RankState&) {
  start_ = std::chrono::steady_clock::now();
  return Status::OK();
}

StatusOr<Flow> TargetAccuracy::AfterEpoch(RankState& state, const EpochEvent&, EpochReport* report) {
  if (!report->evaluated || report->test_accuracy < target_) return Flow::kGoOn;
  reached_ = true;
  report->target_reached = true;
  report->seconds_to_target = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (state.rank == 0) {
    state.observer.Note("--stop-at-accuracy " + NumberText(target_) + ": test accuracy " +
                        FixedText(report->test_accuracy, 4) + " after epoch " + std::to_string(report->epoch) +
                        ", " + FixedText(report->seconds_to_target, 1) + " s after the first step; stopping");
  }
  return Flow::kStop;
}

Status TargetAccuracy::AfterRun(RankState& state, std::vector<EpochReport>* reports) {
  if (reached_ || state.rank != 0) return Status::OK();
  double best = 0;
  for (const EpochReport& r : *reports) best = r.evaluated && r.test_accuracy > best ? r.test_accuracy : best;
  state.observer.Note("--stop-at-accuracy " + NumberText(target_) + ": not reached in " +
                      std::to_string(reports->size()) + " epochs (best test accuracy " + FixedText(best, 4) + ")");
  return Status::OK();
}

}  // namespace granary
