// End to end, train --tune: layouts measured, the fastest chosen.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// --tune-only measures the layouts and marks the fastest, trying
// what changes the numerics only when allowed; --tune then trains in the
// chosen layout, and its probes leave no output file behind.
TEST_F(EndToEnd, TuneMeasuresLayoutsAndTrainsWithTheFastest) {
  const std::string db = dir_.Sub("tune.db");
  ASSERT_EQ(PrepFashion(db, "--limit 3000 --no-progress", dir_).exit_code, 0);
  auto only = TrainJson("--db " + db + " --tune-only --tune-seconds 0.5", dir_);
  const auto& rows = only["tune"]["rows"];
  ASSERT_GE(rows.size(), 3u) << only;  // 1 x 2, 2 x 1 on the standard machine, and channels-last
  double fastest = 0;
  int chosen = 0;
  for (const auto& row : rows) {
    EXPECT_FALSE(row["changes_numerics"].get<bool>()) << row;
    EXPECT_EQ(row["precision"], "fp32") << row;
    EXPECT_EQ(row["batch_size"], 64) << row;
    EXPECT_GT(row["samples_per_s"].get<double>(), 0) << row;
    EXPECT_GT(row["peak_rss_mb"].get<double>(), 10) << row;
    EXPECT_EQ(row["ranks"].get<int>() * row["threads"].get<int>(), only["tune"]["cores"].get<int>()) << row;
    fastest = std::max(fastest, row["samples_per_s"].get<double>());
    chosen += row["chosen"].get<bool>();
  }
  ASSERT_EQ(chosen, 1) << only;
  // Several ranks are measured over both backends where MPI is at hand (the
  // backend is the tuner's: no --backend was given).
  if (RunCommand("command -v mpirun", dir_).exit_code == 0) {
    std::set<std::string> backends;
    for (const auto& row : rows) {
      if (row["ranks"].get<int>() > 1) backends.insert(row["backend"].get<std::string>());
    }
    EXPECT_EQ(backends, (std::set<std::string>{"gloo", "mpi"})) << only;
  }
  for (const auto& row : rows) {
    if (row["chosen"].get<bool>()) {
      EXPECT_EQ(row["samples_per_s"].get<double>(), fastest) << only;
    }
  }
  auto numerics = TrainJson("--db " + db + " --tune-only --tune-seconds 0.5 --tune-numerics", dir_);
  bool doubled = false;
  for (const auto& row : numerics["tune"]["rows"]) {
    doubled = doubled || (row["batch_size"] == 128 && row["changes_numerics"].get<bool>());
  }
  EXPECT_TRUE(doubled) << numerics;

  const std::string metrics = dir_.Sub("run.jsonl");
  auto tuned = TrainJson("--db " + db + " --tune --tune-seconds 0.5 --epochs 1 --metrics " + metrics +
                             " --checkpoint-dir " + dir_.Sub("ck"),
                         dir_);
  int picked_ranks = 0;
  bool picked_cl = false;
  for (const auto& row : tuned["tune"]["rows"]) {
    if (row["chosen"].get<bool>()) picked_ranks = row["ranks"], picked_cl = row["channels_last"];
  }
  EXPECT_EQ(tuned["ranks"], picked_ranks) << tuned;
  EXPECT_EQ(tuned["config"]["model"]["channels_last"], picked_cl) << tuned;
  ASSERT_EQ(tuned["epochs"].size(), 1u);
  EXPECT_TRUE(tuned["epochs"][0].contains("test_accuracy")) << tuned;
  EXPECT_EQ(RunCommand("grep -c '\"type\": *\"epoch\"' " + metrics, dir_).out, "1\n");  // the run's, no probe's
  EXPECT_EQ(RunCommand("ls " + dir_.Sub("ck"), dir_).out, "granary-run.json\nstep-0000000047.ckpt\n");

  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --tune --tune-seconds 0.1", dir_), "--tune-seconds 0.1");
}

}  // namespace
}  // namespace granary
