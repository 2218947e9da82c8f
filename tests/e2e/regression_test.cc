// A table whose label is a number to predict (a price): prep refuses it as
// classes and names --regression, which stores it as float32 field 'target';
// `loader bench` reads it; `train` fits it with the mlp and reports the
// held-out RMSE (in the target's units) and R^2; a saved model predicts in
// those units; what needs classes is refused before any rank starts.
#include <cmath>

#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// price = 300 a - 50 b + 1000 + noise (std about 3), a and b of very
// different scales; row 17's price is no number.
std::string PriceTable(int rows) {
  std::string text = "a,b,price\n";
  for (int i = 0; i < rows; ++i) {
    const double a = (i * 37 % 101) / 10.1, b = (i * 53 % 97) * 100.0;
    const double noise = ((i * 7919) % 13 - 6) * 0.5;
    text += std::to_string(a) + "," + std::to_string(b) + "," +
            (i == 17 ? std::string("n/a?") : std::to_string(300 * a - 0.05 * b + 1000 + noise)) + "\n";
  }
  return text;
}

TEST_F(EndToEnd, ARegressionTableTrainsTheMlpAndReportsRmseAndR2) {
  testing::WriteFile(dir_.Sub("houses.csv"), PriceTable(800));
  const std::string db = dir_.Sub("db"), table = dir_.Sub("houses.csv");
  ExpectOneLineError(RunCommand(kPrep + " build " + table + " " + db + " --label price", dir_), "--regression");
  auto prep = RunCommand(kPrep + " build " + table + " " + db + " --label price --regression --val-fraction 0.2 --json",
                         dir_);
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  const nlohmann::json info = nlohmann::json::parse(RunCommand(kPrep + " info --json " + db, dir_).out);
  EXPECT_EQ(info["label_field"], "target");
  EXPECT_EQ(info["num_classes"], 0);
  EXPECT_EQ(info["element_names"]["target"], nlohmann::json::array({"price"}));
  ASSERT_EQ(info["rejected"].size(), 1u) << info["rejected"];
  EXPECT_NE(info["rejected"][0]["item"].get<std::string>().find("houses.csv:19"), std::string::npos);
  EXPECT_NE(info["rejected"][0]["reason"].get<std::string>().find("column 'price': 'n/a?'"), std::string::npos);
  EXPECT_NE(RunCommand(kPrep + " info " + db, dir_).out.find("target float32 []  (label: a number to predict"),
            std::string::npos);
  auto bench = RunCommand(kLoader + " bench " + db + " --epochs 1", dir_);
  EXPECT_EQ(bench.exit_code, 0) << bench.err;

  auto j = TrainJson("--db " + db + " --ranks 2 --epochs 25 --batch-size 32 --lr 0.003 --dropout 0 --save " +
                         dir_.Sub("m.pt"),
                     dir_);
  EXPECT_EQ(j["config"]["model"]["name"], "mlp");
  const auto& last = j["epochs"].back();
  EXPECT_FALSE(last.contains("test_accuracy")) << last;
  // The prices spread over about 1000; predicting their mean would score RMSE about 900 and R^2 0.
  EXPECT_GT(last["test_r2"].get<double>(), 0.98) << last;
  EXPECT_LT(last["test_rmse"].get<double>(), 100) << last;
  EXPECT_NEAR(last["test_loss"].get<double>(), 1 - last["test_r2"].get<double>(), 0.02) << last;
  // The saved model predicts in the target's units: evaluated alone it scores what the last epoch did.
  auto eval = RunCommand(kTrain + " --db " + db + " --eval-only --model " + dir_.Sub("m.pt") + " --json", dir_);
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const nlohmann::json e = nlohmann::json::parse(eval.out);
  EXPECT_NEAR(e["rmse"].get<double>(), last["test_rmse"].get<double>(), 1e-3 * last["test_rmse"].get<double>());
  EXPECT_NEAR(e["r2"].get<double>(), last["test_r2"].get<double>(), 1e-4);

  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --stop-at-accuracy 0.9", dir_), "no accuracy");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --model convnet", dir_), "predicts classes");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --label-smoothing 0.1", dir_), "number to predict");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --quantize int8", dir_), "no accuracy");
}

// --regression is a CSV table's; elsewhere it is refused, naming the format.
TEST_F(EndToEnd, RegressionIsRefusedForImageDatasets) {
  auto r = RunCommand(kPrep + " build " + std::string(kFashion) + " " + dir_.Sub("db") + " --regression", dir_);
  ExpectOneLineError(r, "--regression");
  EXPECT_NE(r.err.find("read as idx"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace granary
