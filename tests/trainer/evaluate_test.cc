// Evaluation reads a split once, shares it between ranks, and hands back
// what it skipped for the caller to report (the observer, in training).
#include "trainer/eval/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/loader/image_db.h"
#include "loader/class_counts.h"
#include "trainer/loop/step.h"
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

// An imbalanced split (90 of one class, 10 of another) answered "class 0"
// every time scores 0.9 accuracy and 0.5 balanced accuracy: the per-class
// counts tell the model that learnt nothing from one that learnt both.
TEST(Evaluate, ClassFiguresTellAModelThatAnswersTheLargestClassAlways) {
  testing::TempDir dir;
  testing::ImageDbSpec spec = Spec();
  spec.manifest.num_classes = 2;
  testing::WriteImageDb(dir.Sub("db"), 100, spec, [](uint64_t i, std::string* image, int64_t* label) {
    *label = i % 10 == 9 ? 1 : 0;
    image->assign(4, static_cast<char>(*label));
  });
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  LoaderOptions o;
  o.split = "train";
  o.batch_size = 16;
  const auto always_0 = [](const torch::Tensor& x) { return torch::tensor({1.0f, 0.0f}).repeat({x.size(0), 1}); };
  StatusOr<EvalResult> lazy = EvaluateForward(*db.value(), o, always_0);
  ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
  EXPECT_EQ(lazy->class_samples, (std::vector<uint64_t>{90, 10}));
  EXPECT_EQ(lazy->class_correct, (std::vector<uint64_t>{90, 0}));
  EXPECT_EQ(lazy->class_predicted, (std::vector<uint64_t>{100, 0}));
  ClassFigures f = ClassFiguresOf(lazy.value());
  EXPECT_DOUBLE_EQ(f.balanced_accuracy, 0.5);
  EXPECT_TRUE(f.imbalanced);
  EXPECT_EQ(f.largest, 0);
  EXPECT_DOUBLE_EQ(f.largest_share, 0.9);
  EXPECT_EQ(f.most_answered, 0);
  EXPECT_DOUBLE_EQ(f.most_answered_share, 1.0);
  const auto pixel = [](const torch::Tensor& x) {  // class 1 where the pixel is not 0
    const torch::Tensor one = x.flatten(1).select(1, 0).gt(0).to(torch::kFloat32);
    return torch::stack({1 - one, one}, 1);
  };
  StatusOr<EvalResult> learnt = EvaluateForward(*db.value(), o, pixel);
  ASSERT_TRUE(learnt.ok()) << learnt.status().ToString();
  f = ClassFiguresOf(learnt.value());
  EXPECT_DOUBLE_EQ(f.balanced_accuracy, 1.0);
  EXPECT_DOUBLE_EQ(f.most_answered_share, 0.9);
  EvalResult even;  // 50 and 50: not imbalanced; a class without samples has no recall and no say
  even.class_samples = {50, 50, 0};
  even.class_correct = {25, 50, 0};
  even.class_predicted = {25, 75, 0};
  f = ClassFiguresOf(even);
  EXPECT_FALSE(f.imbalanced);
  EXPECT_DOUBLE_EQ(f.balanced_accuracy, 0.75);
  EXPECT_TRUE(std::isnan(f.recall[2]));
}

// --class-weights balanced: weights samples / (classes x count), as
// scikit-learn's "balanced"; a class without samples weighs 0. The loss then
// counts a sample of the rare class as much as those of the common one put
// together, and equals PyTorch's cross_entropy(weight=, label_smoothing=).
TEST(ClassWeights, BalancedWeightsMakeTheLossCountClassesAlike) {
  const std::vector<float> w = BalancedWeights({90, 10, 0});
  EXPECT_FLOAT_EQ(w[0], 100.0f / (2 * 90));
  EXPECT_FLOAT_EQ(w[1], 100.0f / (2 * 10));
  EXPECT_EQ(w[2], 0.0f);
  torch::manual_seed(0);
  const torch::Tensor logits = torch::randn({6, 3});
  const torch::Tensor target = torch::tensor({0, 0, 0, 0, 1, 2}, torch::kLong);
  const torch::Tensor weights = torch::tensor({0.5f, 2.0f, 1.0f});
  for (double smoothing : {0.0, 0.1}) {
    Objective o;
    o.label_smoothing = smoothing;
    o.class_weights = weights;
    const torch::Tensor ours = TrainingLoss(logits, target, o);
    // PyTorch's own, written out: the weighted mean of each sample's smoothed cross-entropy.
    const torch::Tensor log_p = torch::log_softmax(logits, 1);
    const torch::Tensor per_sample =
        -(1 - smoothing) * log_p.gather(1, target.unsqueeze(1)).squeeze(1) - smoothing * log_p.mean(1);
    const torch::Tensor wt = weights.index_select(0, target);
    EXPECT_NEAR(ours.item<double>(), ((wt * per_sample).sum() / wt.sum()).item<double>(), 1e-6) << smoothing;
  }
}

}  // namespace
}  // namespace granary
