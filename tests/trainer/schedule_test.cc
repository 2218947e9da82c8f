#include "trainer/optim/schedule.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

OptimConfig Recipe(const std::string& schedule, double warmup_epochs = 0) {
  OptimConfig o;
  o.lr = 0.1;
  o.epochs = 4;
  o.schedule = schedule;
  o.warmup_epochs = warmup_epochs;
  return o;
}

constexpr int64_t kStepsPerEpoch = 10;  // 40 steps in all

TEST(LrSchedule, ConstantStaysAtTheRate) {
  LrSchedule s(Recipe("constant"), kStepsPerEpoch);
  EXPECT_DOUBLE_EQ(s.At(0), 0.1);
  EXPECT_DOUBLE_EQ(s.At(39), 0.1);
}

TEST(LrSchedule, WarmUpRisesLinearlyToThePeak) {
  LrSchedule s(Recipe("constant", 1), kStepsPerEpoch);
  EXPECT_DOUBLE_EQ(s.At(0), 0.01);
  EXPECT_DOUBLE_EQ(s.At(4), 0.05);
  EXPECT_DOUBLE_EQ(s.At(9), 0.1);
  EXPECT_DOUBLE_EQ(s.At(10), 0.1);
}

TEST(LrSchedule, StepDividesByTenAtHalfAndThreeQuarters) {
  LrSchedule s(Recipe("step"), kStepsPerEpoch);
  EXPECT_DOUBLE_EQ(s.At(19), 0.1);
  EXPECT_NEAR(s.At(20), 0.01, 1e-12);
  EXPECT_NEAR(s.At(29), 0.01, 1e-12);
  EXPECT_NEAR(s.At(30), 0.001, 1e-12);
}

TEST(LrSchedule, CosineFallsFromThePeakAfterWarmUpToNearZero) {
  LrSchedule s(Recipe("cosine", 1), kStepsPerEpoch);
  EXPECT_DOUBLE_EQ(s.At(10), 0.1);     // warm-up done: the peak
  EXPECT_NEAR(s.At(25), 0.05, 1e-12);  // half way through the decay
  EXPECT_LT(s.At(39), 0.001);
  for (int64_t i = 11; i < 40; ++i) EXPECT_LT(s.At(i), s.At(i - 1)) << i;
}

TEST(LrSchedule, LinearScalingMultipliesByBatchOverBaseBatch) {
  OptimConfig o = Recipe("constant");
  o.lr_scaling = LrScaling::kLinear;
  o.batch_size = 1024;
  o.base_batch = 256;
  EXPECT_DOUBLE_EQ(LrSchedule(o, kStepsPerEpoch).peak(), 0.4);
  o.lr_scaling = LrScaling::kNone;
  EXPECT_DOUBLE_EQ(LrSchedule(o, kStepsPerEpoch).peak(), 0.1);
}

TEST(LrSchedule, NamesAreKnown) {
  EXPECT_TRUE(IsKnownSchedule("cosine"));
  EXPECT_FALSE(IsKnownSchedule("linear"));
  EXPECT_EQ(KnownScheduleNames(), "constant, step, cosine");
}

}  // namespace
}  // namespace granary
