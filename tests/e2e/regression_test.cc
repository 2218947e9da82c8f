// A table whose label is a number to predict (a price): prep refuses it as
// classes and names --regression, which stores it as float32 field 'target';
// `loader bench` reads it; `train` fits it with the mlp and reports the
// held-out RMSE and MAE (in the target's units) and R^2; a saved model
// predicts in those units; what needs classes is refused before any rank
// starts.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// price = 300 a - 0.05 b + 1000 + noise (at most 3), a (0-10) and b
// (0-9600) of very different scales; row 17's price is no number.
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
  auto prep =
      RunCommand(kPrep + " build " + table + " " + db + " --label price --regression --val-fraction 0.2 --json", dir_);
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
  auto cat = RunCommand(kPrep + " cat " + db + " --index 0", dir_);
  EXPECT_NE(cat.out.find("target float32 []: "), std::string::npos) << cat.out << cat.err;
  auto bench = RunCommand(kLoader + " bench " + db + " --epochs 1", dir_);
  EXPECT_EQ(bench.exit_code, 0) << bench.err;

  auto j = TrainJson(
      "--db " + db + " --ranks 2 --epochs 25 --batch-size 32 --lr 0.003 --dropout 0 --save " + dir_.Sub("m.pt"), dir_);
  EXPECT_EQ(j["config"]["model"]["name"], "mlp");
  const auto& last = j["epochs"].back();
  EXPECT_FALSE(last.contains("test_accuracy")) << last;
  // The prices spread over about 1000; predicting their mean would score RMSE about 900 and R^2 0.
  EXPECT_GT(last["test_r2"].get<double>(), 0.98) << last;
  EXPECT_LT(last["test_rmse"].get<double>(), 100) << last;
  EXPECT_LE(last["test_mae"].get<double>(), last["test_rmse"].get<double>()) << last;  // as every MAE is
  EXPECT_NEAR(last["test_loss"].get<double>(), 1 - last["test_r2"].get<double>(), 0.02) << last;
  // The saved model predicts in the target's units: evaluated alone it scores what the last epoch did.
  auto eval = RunCommand(kTrain + " --db " + db + " --eval-only --model " + dir_.Sub("m.pt") + " --json", dir_);
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const nlohmann::json e = nlohmann::json::parse(eval.out);
  EXPECT_NEAR(e["rmse"].get<double>(), last["test_rmse"].get<double>(), 1e-3 * last["test_rmse"].get<double>());
  EXPECT_NEAR(e["r2"].get<double>(), last["test_r2"].get<double>(), 1e-4);
  EXPECT_NEAR(e["mae"].get<double>(), last["test_mae"].get<double>(), 1e-3 * last["test_mae"].get<double>());

  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --stop-at-accuracy 0.9", dir_), "no accuracy");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --label-smoothing 0.1", dir_), "number to predict");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --quantize int8", dir_), "no accuracy");
}

// A saved model of a regression target used on a db of classes, and the
// other way round: refused by the model's card, before any evaluation.
TEST_F(EndToEnd, ASavedModelOfTheOtherKindOfTargetIsRefusedByItsCard) {
  std::string classes = "a,b,label\n";
  for (int i = 0; i < 120; ++i) {
    classes += std::to_string(i % 11) + "," + std::to_string(i % 7) + "," + std::to_string(i % 2) + "\n";
  }
  testing::WriteFile(dir_.Sub("classes.csv"), classes);
  testing::WriteFile(dir_.Sub("prices.csv"), PriceTable(120));
  const std::string classes_db = dir_.Sub("classes"), prices_db = dir_.Sub("prices");
  auto prep = RunCommand(kPrep + " build " + dir_.Sub("classes.csv") + " " + classes_db + " --val-fraction 0.2", dir_);
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  prep = RunCommand(kPrep + " build " + dir_.Sub("prices.csv") + " " + prices_db +
                        " --label price --regression --val-fraction 0.2 --max-rejects 0.1",
                    dir_);
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  TrainJson("--db " + classes_db + " --ranks 1 --epochs 1 --save " + dir_.Sub("classifier.pt"), dir_);
  TrainJson("--db " + prices_db + " --ranks 1 --epochs 1 --save " + dir_.Sub("regressor.pt"), dir_);
  ExpectOneLineError(
      RunCommand(kTrain + " --db " + prices_db + " --eval-only --model " + dir_.Sub("classifier.pt"), dir_),
      "predicts 2 classes (its card says); the db's label 'target' is a number to predict");
  ExpectOneLineError(
      RunCommand(kTrain + " --db " + classes_db + " --eval-only --model " + dir_.Sub("regressor.pt"), dir_),
      "predicts a number, regression target 'target' (its card says); the db's label 'label' is 2 classes");
}

// Kaggle's House Prices as downloaded: train.csv with an Id, a text column,
// NA values and SalePrice in whole dollars; test.csv without SalePrice. The
// column test.csv lacks is found as the label, and its integers, nearly all
// distinct, are refused as classes, naming --regression, which builds it.
TEST_F(EndToEnd, KaggleHousePricesAreRefusedAsClassesAndBuiltWithRegression) {
  const std::string folder = dir_.Sub("house-prices");
  std::string train = "Id,LotArea,MSZoning,LotFrontage,SalePrice\n", test = "Id,LotArea,MSZoning,LotFrontage\n";
  for (int i = 1; i <= 300; ++i) {
    const std::string row = std::to_string(i) + "," + std::to_string(3000 + i * 37 % 9000) + "," +
                            (i % 3 == 0 ? "RL" : "RM") + "," + (i % 10 == 0 ? "NA" : std::to_string(20 + i % 90));
    train += row + "," + std::to_string(50000 + i * 37 % 9000 * 8 + (i % 3 == 0 ? 20000 : 0)) + "\n";
    test += row + "\n";
  }
  ASSERT_EQ(RunCommand("mkdir " + folder, dir_).exit_code, 0);
  testing::WriteFile(folder + "/train.csv", train);
  testing::WriteFile(folder + "/test.csv", test);
  const std::string db = dir_.Sub("db");
  ExpectOneLineError(RunCommand(kPrep + " build " + folder + " " + db, dir_),
                     "column 'SalePrice' holds 300 classes for 300 rows: a number to predict");
  const std::string options = " --regression --drop Id --missing nan --val-fraction 0.2";
  auto prep = RunCommand(kPrep + " build " + folder + " " + db + options, dir_);
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  EXPECT_NE(prep.err.find("test.csv: " + folder + "/train.csv's columns without its label 'SalePrice'"),
            std::string::npos)
      << prep.err;
  auto j = TrainJson("--db " + db + " --ranks 1 --epochs 2", dir_);
  EXPECT_TRUE(j["epochs"].back().contains("test_r2")) << j["epochs"].back();
}

// --regression is a CSV table's; elsewhere it is refused, naming the format.
TEST_F(EndToEnd, RegressionIsRefusedForImageDatasets) {
  auto r = RunCommand(kPrep + " build " + std::string(kFashion) + " " + dir_.Sub("db") + " --regression", dir_);
  ExpectOneLineError(r, "--regression");
  EXPECT_NE(r.err.find("read as idx"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace granary
