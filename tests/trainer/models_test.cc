#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "store/db.h"
#include "tests/test_util.h"
#include "tests/trainer/models_util.h"
#include "trainer/loop/input_statistics.h"
#include "trainer/models/registry.h"

namespace granary {
namespace {

using testing::ModelCase;
using testing::ParameterCount;

// Every model maps a batch of its input to one logit per class, and every
// parameter gets a gradient from the loss.
TEST(Models, EveryModelMapsItsInputToLogitsAndTrainsEveryParameter) {
  const ModelCase cases[] = {
      {"mlp", {30}},           {"mlp", {1, 28, 28}},    {"convnet", {1, 28, 28}},   {"resnet", {3, 64, 64}},
      {"resnet", {1, 28, 28}}, {"resnet", {3, 96, 80}}, {"mobilenet", {3, 64, 64}}, {"mobilenet", {3, 128, 128}}};
  for (const ModelCase& c : cases) {
    SCOPED_TRACE(c.model + " " + ShapeToString(c.input));
    auto model = CreateModel({c.model, c.input, 7, 0.1});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    Shape batch = {5};
    batch.insert(batch.end(), c.input.begin(), c.input.end());
    torch::Tensor logits = model.value()->forward(torch::rand(batch));
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{5, 7}));
    torch::nll_loss(torch::log_softmax(logits, 1), torch::arange(5) % 7).backward();
    for (const auto& p : model.value()->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
    }
  }
}

TEST(Models, WidthScalesTheChannels) {
  for (const char* name : {"mlp", "convnet", "resnet", "mobilenet"}) {
    const Shape in = std::string(name) == "mlp" ? Shape{30} : Shape{3, 32, 32};
    ModelSpec narrow{name, in, 10, 0}, wide{name, in, 10, 0};
    narrow.width = 0.5;
    wide.width = 2;
    const int64_t n = ParameterCount(*CreateModel(narrow).value()), w = ParameterCount(*CreateModel(wide).value());
    EXPECT_GT(w, 3 * n) << name;  // most layers scale both ways: ~16x for convs
  }
}

// Models with BatchNorm keep running statistics as buffers (broadcast from rank 0).
TEST(Models, ResNetAndMobileNetHaveBatchNormBuffers) {
  for (const char* name : {"resnet", "mobilenet"}) {
    auto model = CreateModel({name, {3, 32, 32}, 10, 0});
    EXPECT_FALSE(model.value()->buffers().empty()) << name;
  }
}

// A feature-vector MLP standardises its input with the statistics it was
// given: it computes on x what the same MLP without them computes on
// (x - mean) / std; and they are buffers, so they travel with the model.
TEST(Models, MlpStandardisesWithTheTrainingStatistics) {
  ModelSpec plain{"mlp", {4}, 3, 0};
  ModelSpec standardising = plain;
  standardising.input_mean = torch::tensor({1.0, -2.0, 100.0, 0.0}, torch::kFloat64);
  standardising.input_std = torch::tensor({2.0, 0.5, 50.0, 1.0}, torch::kFloat64);
  torch::manual_seed(3);
  auto a = CreateModel(standardising).value();
  torch::manual_seed(3);
  auto b = CreateModel(plain).value();
  EXPECT_EQ(a->buffers().size(), 2u);
  EXPECT_TRUE(b->buffers().empty());
  torch::Tensor x = torch::rand({6, 4}) * 100;
  torch::Tensor z = (x - standardising.input_mean.to(torch::kFloat32)) / standardising.input_std.to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(a->forward(x), b->forward(z), 1e-4, 1e-5));
}

// The statistics prep recorded in the manifest are those a pass over the
// training split computes: the MLP standardises with them without the pass.
TEST(Models, TheManifestsStatisticsAreThoseAPassComputes) {
  testing::TempDir dir;
  std::string rows = "a,b,c,never,y\n";
  for (int i = 0; i < 900; ++i) {
    rows += std::to_string((i * 37 % 101) * 10.0 + 1e4) + "," + (i % 6 == 0 ? "NA" : std::to_string(i % 7)) +
            ",5,," + std::to_string(i % 3) + "\n";
  }
  testing::WriteFile(dir.Sub("t.csv"), rows);
  const std::string db_path = dir.Sub("db");
  ASSERT_EQ(std::system((std::string(GRANARY_PREP_BIN) + " build " + dir.Sub("t.csv") + " " + db_path +
                         " --label y --missing nan --val-fraction 0.2 --no-progress > /dev/null").c_str()),
            0);
  auto db = DbReader::Open(db_path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_EQ(db.value()->manifest().statistics.count("train"), 1u);
  LoaderOptions o;
  o.input_field = "features";
  o.scale = 1;
  o.batch_size = 64;
  auto recorded = InputStatisticsOf(*db.value(), o);
  auto computed = ComputeInputStatistics(*db.value(), o);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  ASSERT_TRUE(computed.ok()) << computed.status().ToString();
  EXPECT_TRUE(torch::allclose(recorded->mean, computed->mean, 1e-9, 1e-9)) << recorded->mean << computed->mean;
  EXPECT_TRUE(torch::allclose(recorded->stddev, computed->stddev, 1e-6, 1e-9))
      << recorded->stddev << computed->stddev;
  EXPECT_TRUE(torch::equal(recorded->missing, computed->missing)) << recorded->missing << computed->missing;
  // Constant ("c") and never present ("never"): mean as computed, deviation 1.
  EXPECT_EQ(recorded->stddev[2].item<double>(), 1.0);
  EXPECT_EQ(recorded->stddev[3].item<double>(), 1.0);
  EXPECT_EQ(recorded->mean[3].item<double>(), 0.0);
}

TEST(Models, InputsAModelCannotTakeAreRefusedNamingIt) {
  auto flat = CreateModel({"convnet", {30}, 2, 0});
  EXPECT_EQ(flat.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(flat.status().message().find("model convnet: needs a 3-dim image input"), std::string::npos)
      << flat.status().message();
  auto resnet = CreateModel({"resnet", {30}, 2, 0});
  EXPECT_NE(resnet.status().message().find("model resnet: needs a 3-dim image input"), std::string::npos)
      << resnet.status().message();
  EXPECT_NE(resnet.status().message().find("[30]"), std::string::npos) << resnet.status().message();
  EXPECT_EQ(CreateModel({"mobilenet", {3, 4, 4}, 2, 0}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CreateModel({"convnet", {1, 28, 28}, 1, 0}).status().code(), Status::Code::kInvalidArgument);
  ModelSpec zero_width{"mlp", {30}, 2, 0};
  zero_width.width = 0;
  EXPECT_EQ(CreateModel(zero_width).status().code(), Status::Code::kInvalidArgument);
  auto unknown = CreateModel({"transformer", {1, 28, 28}, 10, 0});
  EXPECT_NE(unknown.status().message().find("known: mlp, convnet, resnet, mobilenet"), std::string::npos)
      << unknown.status().message();
  EXPECT_TRUE(IsKnownModel("resnet"));
  EXPECT_FALSE(IsKnownModel("transformer"));
}

}  // namespace
}  // namespace granary
