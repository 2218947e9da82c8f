// The learning rate at each optimizer step of a run: a linear warm-up to the
// peak, then constant, step (x0.1 at half and at three quarters of the run)
// or cosine (to 0 at the end). The peak is --lr, times batch / base batch with
// --lr-scaling linear (the "bigger batch, scaled learning rate" rule).
#pragma once

#include <cstdint>
#include <string>

#include "trainer/config/choices.h"
#include "trainer/config/config.h"

namespace granary {

class LrSchedule {
 public:
  // `steps_per_epoch`: optimizer steps (not micro-batches) in one epoch.
  LrSchedule(const OptimConfig& config, int64_t steps_per_epoch);

  double peak() const { return peak_; }
  // The rate for optimizer step `step` (0-based, counted over the whole run).
  double At(int64_t step) const;

 private:
  std::string kind_;
  double peak_;
  int64_t warmup_steps_;
  int64_t total_steps_;
};

}  // namespace granary
