#include "trainer/config/workload.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

Manifest WithFields(std::vector<FieldSpec> fields, std::vector<std::string> splits = {"train", "test"}) {
  Manifest m;
  m.schema.fields = std::move(fields);
  m.label_field = "label";
  m.num_classes = 10;
  for (const std::string& s : splits) {
    SplitInfo info;
    info.name = s;
    m.splits.push_back(info);
  }
  return m;
}

const FieldSpec kLabel = {"label", DType::kInt64, {}, ""};

TrainConfig Auto() {
  TrainConfig c;
  c.data.db = "db";
  return c;
}

TEST(Workload, SmallImagesGetTheConvNetAndTheTestSplit) {
  TrainConfig c = Auto();
  auto w = ResolveWorkload(WithFields({{"image", DType::kUInt8, {28, 28, 1}, "HWC"}, kLabel}), "db", &c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->kind, InputKind::kImage);
  EXPECT_EQ(w->input_shape, (Shape{1, 28, 28}));
  EXPECT_TRUE(w->input_uint8);
  EXPECT_EQ(c.model.name, "convnet");
  EXPECT_EQ(c.data.input_field, "image");
  EXPECT_EQ(c.data.eval_split, "test");
}

TEST(Workload, LargerImagesGetTheResNet) {
  TrainConfig c = Auto();
  ASSERT_TRUE(ResolveWorkload(WithFields({{"image", DType::kUInt8, {3, 64, 64}, "CHW"}, kLabel}), "db", &c).ok());
  EXPECT_EQ(c.model.name, "resnet");
}

// A CSV db: a feature vector, its only split besides train is val.
TEST(Workload, FeatureVectorsGetTheMlpAndTheValSplit) {
  TrainConfig c = Auto();
  auto w = ResolveWorkload(WithFields({{"features", DType::kFloat32, {30}, ""}, kLabel}, {"train", "val"}), "db", &c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->kind, InputKind::kFeatures);
  EXPECT_FALSE(w->input_uint8);
  EXPECT_EQ(c.model.name, "mlp");
  EXPECT_EQ(c.data.input_field, "features");
  EXPECT_EQ(c.data.eval_split, "val");
}

// --train-split test: auto never evaluates on the split it trains on (its
// scores would be of samples the model learnt), so val, else none.
TEST(Workload, TheEvalSplitIsNeverTheOneTrainedOn) {
  const FieldSpec image = {"image", DType::kUInt8, {28, 28, 1}, "HWC"};
  for (const auto& [splits, chosen] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"train", "val", "test"}, "val"}, {{"train", "test"}, ""}}) {
    TrainConfig c = Auto();
    c.data.train_split = "test";
    ASSERT_TRUE(ResolveWorkload(WithFields({image, kLabel}, splits), "db", &c).ok());
    EXPECT_EQ(c.data.eval_split, chosen) << splits.size();
  }
}

TEST(Workload, ExplicitChoicesAreKept) {
  TrainConfig c = Auto();
  c.model.name = "mobilenet";
  c.data.eval_split = "";
  ASSERT_TRUE(ResolveWorkload(WithFields({{"image", DType::kUInt8, {28, 28, 1}, "HWC"}, kLabel}), "db", &c).ok());
  EXPECT_EQ(c.model.name, "mobilenet");
  EXPECT_EQ(c.data.eval_split, "");
}

// Resolving twice (launcher, then rank) changes nothing the second time.
TEST(Workload, ResolvingIsIdempotent) {
  TrainConfig c = Auto();
  const Manifest m = WithFields({{"features", DType::kFloat32, {30}, ""}, kLabel}, {"train"});
  ASSERT_TRUE(ResolveWorkload(m, "db", &c).ok());
  const TrainConfig once = c;
  ASSERT_TRUE(ResolveWorkload(m, "db", &c).ok());
  EXPECT_EQ(c, once) << c.Differences(once).front();
  EXPECT_EQ(c.data.eval_split, "");  // no test or val split: no evaluation
}

// A float label is a number to predict: one output, and the train split's
// mean and std of it (from the manifest) for the model to scale by.
TEST(Workload, AFloatLabelIsARegressionTargetWithItsTrainStatistics) {
  Manifest m = WithFields({{"x", DType::kFloat32, {3}, ""}, {"label", DType::kFloat32, {}, ""}});
  FieldStatistics price;
  price.samples = 10;
  price.mean = {250.0};
  price.stddev = {40.0};
  m.statistics["train"]["label"] = price;
  TrainConfig c = Auto();
  auto w = ResolveWorkload(m, "the.db", &c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(w->regression);
  EXPECT_EQ(w->outputs, 1);
  EXPECT_EQ(w->target_mean, 250.0);
  EXPECT_EQ(w->target_std, 40.0);
  EXPECT_EQ(c.model.name, "mlp");
}

TEST(Workload, DbsThatCannotBeTrainedAreRefusedNamingTheFieldAndShape) {
  struct Bad {
    Manifest manifest;
    std::string input_field, needle;
  };
  Manifest no_label = WithFields({{"image", DType::kUInt8, {28, 28, 1}, "HWC"}});
  no_label.label_field = "";
  // A float label is a number to predict, fitted in units of its std: the manifest must record it.
  Manifest float_label = WithFields({{"x", DType::kFloat32, {3}, ""}, {"label", DType::kFloat32, {}, ""}});
  Manifest vector_label = WithFields({{"x", DType::kFloat32, {3}, ""}, {"label", DType::kFloat32, {2}, ""}});
  Manifest one_class = WithFields({{"x", DType::kFloat32, {3}, ""}, kLabel});
  one_class.num_classes = 1;
  const Bad cases[] = {
      {no_label, "", "no label field"},
      {float_label, "", "label field 'label' is a number to predict, and the manifest records no statistics"},
      {vector_label, "", "label field 'label' is float32 [2]: training needs a class or a value per sample"},
      {one_class, "", "label field 'label' has 1 class: training needs at least 2"},
      {WithFields({{"a", DType::kFloat32, {3}, ""}, {"b", DType::kFloat32, {3}, ""}, kLabel}), "",
       "pick one with --input-field"},
      {WithFields({{"x", DType::kFloat32, {kVariableDim}, ""}, kLabel}), "", "field 'x' has shape [-1]"},
      {WithFields({{"x", DType::kFloat32, {4, 5}, ""}, kLabel}), "", "field 'x' has shape [4, 5]"},
      {WithFields({{"x", DType::kFloat32, {3}, ""}, kLabel}), "y", "--input-field y"},
      {WithFields({{"x", DType::kFloat32, {3}, ""}, kLabel}), "label", "is the label field"},
  };
  for (const Bad& b : cases) {
    TrainConfig c = Auto();
    c.data.input_field = b.input_field;
    auto w = ResolveWorkload(b.manifest, "the.db", &c);
    EXPECT_EQ(w.status().code(), Status::Code::kInvalidArgument) << b.needle;
    EXPECT_NE(w.status().message().find(b.needle), std::string::npos) << w.status().message();
  }
  TrainConfig c = Auto();
  c.model.channels_last = true;
  auto w = ResolveWorkload(WithFields({{"x", DType::kFloat32, {3}, ""}, kLabel}), "db", &c);
  EXPECT_NE(w.status().message().find("--channels-last"), std::string::npos) << w.status().message();
}

// A split to train or evaluate on that is missing or empty is named before any
// rank starts (it used to be found after training, or in every rank).
TEST(Workload, AMissingOrEmptySplitIsNamedByItsFlag) {
  Manifest m = WithFields({kLabel}, {"train", "val"});
  m.splits[0].count = 100;  // val is empty
  DataConfig d;
  d.eval_split = "";
  EXPECT_TRUE(CheckSplits(m, "db", d, SplitUse::kTrain).ok());
  d.eval_split = "val";
  EXPECT_EQ(CheckSplits(m, "db", d, SplitUse::kTrain).message(),
            "--eval-split val: split 'val' of db is empty (0 samples)");
  d.train_split = "val";
  d.eval_split = "train";
  EXPECT_EQ(CheckSplits(m, "db", d, SplitUse::kTrain).message(),
            "--train-split val: split 'val' of db is empty (0 samples)");
  EXPECT_TRUE(CheckSplits(m, "db", d, SplitUse::kEvaluate).ok());  // an evaluation reads only --eval-split
  d.eval_split = "test";
  EXPECT_EQ(CheckSplits(m, "db", d, SplitUse::kEvaluate).message(),
            "--eval-split test: db has no such split (it has train, val)");
}

}  // namespace
}  // namespace granary
