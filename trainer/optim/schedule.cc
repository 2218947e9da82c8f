#include "trainer/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "trainer/named_table.h"

namespace granary {
namespace {

struct ScheduleName {
  const char* name;
};
constexpr ScheduleName kSchedules[] = {{"constant"}, {"step"}, {"cosine"}};
constexpr double kStepGamma = 0.1;

}  // namespace

LrSchedule::LrSchedule(const OptimConfig& config, int64_t steps_per_epoch)
    : kind_(config.schedule),
      peak_(config.lr_scaling == LrScaling::kLinear
                ? config.lr * static_cast<double>(config.batch_size) / static_cast<double>(config.base_batch)
                : config.lr),
      warmup_steps_(std::llround(config.warmup_epochs * static_cast<double>(steps_per_epoch))),
      total_steps_(std::max<int64_t>(1, int64_t{config.epochs} * steps_per_epoch)) {}

double LrSchedule::At(int64_t step) const {
  if (step < warmup_steps_) return peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  const double progress = static_cast<double>(step) / static_cast<double>(total_steps_);
  if (kind_ == "step") return peak_ * (progress >= 0.75 ? kStepGamma * kStepGamma : progress >= 0.5 ? kStepGamma : 1);
  if (kind_ == "cosine") {
    const double span = static_cast<double>(std::max<int64_t>(1, total_steps_ - warmup_steps_));
    const double t = std::min(1.0, static_cast<double>(step - warmup_steps_) / span);
    return peak_ * 0.5 * (1 + std::cos(M_PI * t));
  }
  return peak_;
}

bool IsKnownSchedule(const std::string& name) { return FindByName(kSchedules, name) != nullptr; }

std::string KnownScheduleNames() { return JoinNames(kSchedules); }

}  // namespace granary
