// Scores of a held-out split as a user reads them: never of the split the
// run trains on, and a run that has gone past its best (overfitting) says so.
#include <random>

#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// The split a run trains on is never scored as if held out: --train-split
// test leaves auto no split to evaluate, and an --eval-split naming it is
// warned of.
TEST_F(EndToEnd, TheSplitARunTrainsOnIsNotScoredAsIfHeldOut) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 300 --no-progress", dir_).exit_code, 0);  // train and test
  const std::string run = kTrain + " --db " + db + " --ranks 1 --epochs 1 --batch-size 300";
  auto on_test = RunCommand(run + " --train-split test", dir_);
  ASSERT_EQ(on_test.exit_code, 0) << on_test.err;
  EXPECT_EQ(on_test.out.find("test_acc"), std::string::npos) << on_test.out;
  EXPECT_NE(on_test.out.find("train: no evaluation"), std::string::npos) << on_test.out;
  auto on_train = RunCommand(run + " --eval-split train", dir_);
  ASSERT_EQ(on_train.exit_code, 0) << on_train.err;
  EXPECT_NE(on_train.err.find("train: warning: --eval-split train is the split it trains on: its test_loss and "
                              "test_acc say how well the model fits the samples it learns from"),
            std::string::npos)
      << on_train.err;
  auto held_out = RunCommand(run, dir_);
  ASSERT_EQ(held_out.exit_code, 0) << held_out.err;
  EXPECT_EQ(held_out.err.find("warning"), std::string::npos) << held_out.err;
  EXPECT_NE(held_out.out.find("test_acc"), std::string::npos) << held_out.out;
}

// A table of 40 noise features and one that decides, 30% of its labels
// flipped: an MLP wide enough learns the flips of the train split by heart
// and scores worse on val (and its val loss climbs) than it did early on.
std::string NoisyTable(int rows) {
  std::mt19937 random(7);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  std::string table;
  for (int i = 0; i < 40; ++i) table += "x" + std::to_string(i) + ",";
  table += "label\n";
  for (int r = 0; r < rows; ++r) {
    double first = 0;
    for (int i = 0; i < 40; ++i) {
      const double x = normal(random);
      if (i == 0) first = x;
      table += std::to_string(x) + ",";
    }
    table += std::to_string((first > 0) != (uniform(random) < 0.3) ? 1 : 0) + "\n";
  }
  return table;
}

TEST_F(EndToEnd, ARunPastItsBestSaysSoAndWhichEpochWasBest) {
  testing::WriteFile(dir_.Sub("noisy.csv"), NoisyTable(1500));
  const std::string db = dir_.Sub("noisy.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("noisy.csv") + " " + db + " --val-fraction 0.3 --no-progress",
                       dir_).exit_code, 0);
  const std::string run = kTrain + " --db " + db + " --ranks 1 --dropout 0 --lr 0.003 --width 4 --epochs ";
  auto long_run = RunCommand(run + "10 --save " + dir_.Sub("m.pt"), dir_);
  ASSERT_EQ(long_run.exit_code, 0) << long_run.err;
  const size_t said = long_run.out.find(": past epoch ");
  ASSERT_NE(said, std::string::npos) << long_run.out;
  const std::string line = long_run.out.substr(long_run.out.rfind("\ntrain: ", said) + 1);
  EXPECT_NE(line.find("the model fits split 'train' at the cost of samples it has not seen (overfitting), and the "
                      "model saved is the last epoch's; --epochs "),
            std::string::npos) << line;
  EXPECT_TRUE(line.rfind("train: test_loss was lowest after epoch ", 0) == 0 ||  // it climbs 2x and more
              line.rfind("train: test_acc peaked at ", 0) == 0)
      << line;
  const int best = std::stoi(line.substr(line.find("past epoch ") + 11));
  ASSERT_GE(best, 1);
  ASSERT_LE(best, 4);
  auto json = TrainJson(run.substr(kTrain.size() + 1) + "10", dir_);  // a script finds it too
  ASSERT_TRUE(json["epochs"].back().contains("notes")) << json["epochs"].back();
  EXPECT_NE(json["epochs"].back()["notes"][0].get<std::string>().find(": past epoch "), std::string::npos);
  auto to_best = RunCommand(run + std::to_string(best), dir_);
  ASSERT_EQ(to_best.exit_code, 0) << to_best.err;
  EXPECT_EQ(to_best.out.find("past epoch"), std::string::npos) << to_best.out;
}

}  // namespace
}  // namespace granary
