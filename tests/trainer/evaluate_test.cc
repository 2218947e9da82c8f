// Evaluation reads a split once, shares it between ranks, and hands back
// what it skipped for the caller to report (the observer, in training).
#include "trainer/eval/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

// 64 samples of a 1x2x2 image all equal to i, label i % 10, in one shard.
testing::ImageDbSpec Spec() {
  testing::ImageDbSpec spec;
  spec.image_shape = {1, 2, 2};
  spec.manifest.label_field = "label";
  spec.manifest.num_classes = 10;
  return spec;
}

// Logits that make class (pixel x 255) % 10 the answer: exactly right on this db.
torch::Tensor Oracle(const torch::Tensor& input) {
  torch::Tensor label = (input.flatten(1).select(1, 0) * 255).round().to(torch::kInt64).remainder(10);
  return torch::one_hot(label, 10).to(torch::kFloat32) * 10;
}

TEST(Evaluate, SkippedRecordsComeBackNamedAndRanksShareTheSplit) {
  testing::TempDir dir;
  testing::WriteImageDb(dir.Sub("db"), 64, Spec(), [](uint64_t i, std::string* image, int64_t* label) {
    image->assign(4, static_cast<char>(i));
    *label = static_cast<int64_t>(i % 10);
  });
  ASSERT_GT(testing::CorruptStoredSample(dir.Sub("db/train/shard-00000.mdb"), Spec(), std::string(4, '\x09'), 9), 0);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  LoaderOptions o;
  o.split = "train";
  o.batch_size = 8;
  o.scale = 1.0f / 255.0f;

  StatusOr<EvalResult> strict = EvaluateForward(*db.value(), o, Oracle);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("key 9"), std::string::npos) << strict.status().message();

  o.skip_corrupt = true;
  uint64_t samples = 0, correct = 0;
  std::vector<std::string> skipped;
  for (int rank = 0; rank < 2; ++rank) {
    StatusOr<EvalResult> r = EvaluateForward(*db.value(), o, Oracle, rank, 2);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    samples += r->samples;
    correct += r->correct;
    skipped.insert(skipped.end(), r->skipped.begin(), r->skipped.end());
  }
  ASSERT_EQ(skipped.size(), 1u);  // one rank read it, and says why
  EXPECT_EQ(skipped[0].rfind("sample 9: train/shard-00000.mdb, key 9: ", 0), 0u) << skipped[0];
  EXPECT_EQ(samples, 63u);
  EXPECT_EQ(correct, 63u);
}

// A regression target's figures from its sums: targets 1, 2, 3, 4 (mean
// 2.5, squared deviations 5) predicted with errors 1, -1, 0, 0: RMSE
// sqrt(2 / 4), MAE 2 / 4, R^2 1 - 2 / 5, the loss the mean squared error
// over the target's variance; targets that do not vary give R^2 0, not a
// division by 0, and no samples no figures.
TEST(Evaluate, RegressionFiguresAreRmseMaeAndR2) {
  EvalResult sums;
  sums.samples = 4;
  sums.squared_error_sum = 2;
  sums.absolute_error_sum = 2;
  sums.target_sum = 10;
  sums.target_squared_sum = 30;
  const RegressionFigures f = RegressionFiguresOf(sums, 2);
  EXPECT_DOUBLE_EQ(f.rmse, std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(f.mae, 0.5);
  EXPECT_DOUBLE_EQ(f.r2, 1 - 2.0 / 5);
  EXPECT_DOUBLE_EQ(f.loss, 0.5 / 4);
  sums.target_sum = 12;  // four 3s
  sums.target_squared_sum = 36;
  EXPECT_EQ(RegressionFiguresOf(sums, 1).r2, 0);
  EXPECT_EQ(RegressionFiguresOf(EvalResult{}, 1).rmse, 0);
}

}  // namespace
}  // namespace granary
