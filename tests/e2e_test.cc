// End to end: the prep and train executables on a slice of the real
// Fashion-MNIST files that tools/setup installs, and their bad-input paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "store/file.h"
#include "store/json_text.h"
#include "tests/test_util.h"

namespace granary {
namespace {

namespace fs = std::filesystem;
using testing::ExpectOneLineError;
using testing::FreePort;
using testing::RunCommand;
using testing::TempDir;

const char kFashion[] = "/usr/share/datasets/fashion-mnist";
const std::string kPrep = GRANARY_PREP_BIN;
const std::string kTrain = GRANARY_TRAIN_BIN;
const std::string kLoader = GRANARY_LOADER_BIN;


class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kFashion)) << kFashion << " is missing: run tools/setup";
  }
  TempDir dir_;
};

nlohmann::json TrainJson(const std::string& args, const TempDir& dir) {
  auto r = RunCommand(kTrain + " " + args + " --json", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST_F(EndToEnd, PrepThenTwoRankTrainingLowersTheLoss) {
  const std::string db = dir_.Sub("db");
  auto prep = RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 3000 --json", dir_);
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  auto summary = nlohmann::json::parse(prep.out);
  EXPECT_EQ(summary["written"], 6000);
  EXPECT_EQ(summary["rejected"], 0);

  auto j = TrainJson("--db " + db + " --ranks 2 --epochs 3 --seed 1", dir_);
  ASSERT_EQ(j["ranks"], 2);
  ASSERT_EQ(j["epochs"].size(), 3u);
  const auto& e = j["epochs"];
  EXPECT_LT(e[2]["train_loss"].get<double>(), e[0]["train_loss"].get<double>());
  EXPECT_LT(e[2]["train_loss"].get<double>(), 0.9);
  EXPECT_GT(e[2]["test_accuracy"].get<double>(), 0.70);  // 10 classes: chance is 0.10
  EXPECT_EQ(e[2]["test_samples"], 3000);
}

// Without dropout, 1 rank with batch B and 2 ranks with B/2 each see the same
// global batches and average the same gradients, so they train alike.
TEST_F(EndToEnd, OneAndTwoRanksFollowTheSameTrajectory) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 1024", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --epochs 1 --seed 3 --dropout 0 --batch-size 32";
  auto one = TrainJson(args + " --ranks 1", dir_);
  auto two = TrainJson(args + " --ranks 2 --sync after-backward", dir_);
  ASSERT_EQ(one["epochs"].size(), 1u);
  ASSERT_EQ(two["epochs"].size(), 1u);
  EXPECT_NEAR(one["epochs"][0]["train_loss"].get<double>(), two["epochs"][0]["train_loss"].get<double>(), 0.01);
  EXPECT_NEAR(one["epochs"][0]["test_loss"].get<double>(), two["epochs"][0]["test_loss"].get<double>(), 0.02);
  // Two ranks accumulating two micro-batches of 8 take the same steps (to float rounding).
  for (const char* sync : {"after-backward", "bucketed"}) {
    auto accum = TrainJson(args + " --ranks 2 --accum 2 --sync " + sync, dir_);
    // (Stepping after every micro-batch instead would differ by about 0.1.)
    // Rounding grows over the epoch's 32 steps with the CPU's kernels: on an
    // AMX Xeon the test loss differed by 4.2e-4 (the train loss by 1.2e-5).
    EXPECT_NEAR(one["epochs"][0]["train_loss"].get<double>(), accum["epochs"][0]["train_loss"].get<double>(), 1e-4)
        << sync;
    EXPECT_NEAR(one["epochs"][0]["test_loss"].get<double>(), accum["epochs"][0]["test_loss"].get<double>(), 1e-3)
        << sync;
  }
  // The bucketed, overlapped sync averages the same values as the flat one:
  // the same losses, exactly.
  auto bucketed = TrainJson(args + " --ranks 2 --sync bucketed --bucket-mb 1", dir_);
  EXPECT_EQ(bucketed["epochs"][0]["train_loss"], two["epochs"][0]["train_loss"]);
  EXPECT_EQ(bucketed["epochs"][0]["test_loss"], two["epochs"][0]["test_loss"]);
}

// --synthetic times the step alone: no loader wait, no sync wait, no
// evaluation; and the launcher's layout is reported with the run.
TEST_F(EndToEnd, SyntheticRunsOnlyComputeAndTheLayoutIsReported) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 512", dir_).exit_code, 0);
  auto j = TrainJson("--db " + db + " --ranks 2 --epochs 1 --batch-size 32 --synthetic --oversubscribe", dir_);
  ASSERT_EQ(j["epochs"].size(), 1u);
  const auto& e = j["epochs"][0];
  EXPECT_EQ(e["stall_fraction"], 0.0);
  EXPECT_EQ(e["comm_fraction"], 0.0);
  EXPECT_EQ(e["queue_depth"], 0.0);
  EXPECT_GT(e["samples_per_s"].get<double>(), 0);
  EXPECT_FALSE(e.contains("test_accuracy"));
  EXPECT_EQ(j["config"]["data"]["synthetic"], true);
  EXPECT_EQ(j["layout"]["ranks"], 2);
  EXPECT_EQ(j["layout"]["threads"], j["threads_per_rank"]);
  EXPECT_EQ(j["config"]["dist"]["threads"], j["threads_per_rank"]);  // resolved, as run
  EXPECT_NE(j["layout_text"].get<std::string>().find("2 ranks x"), std::string::npos) << j["layout_text"];
}

TEST_F(EndToEnd, BadRawInputEndsWithOneLineAndNoDb) {
  const std::string db = dir_.Sub("db");
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("missing") + " " + db, dir_), "no such folder");
  fs::create_directory(dir_.Sub("empty"));
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("empty") + " " + db, dir_), "folder is empty");
  fs::create_directory(dir_.Sub("junk"));
  testing::WriteFile(dir_.Sub("junk/train-images-idx3-ubyte"), "this is not an IDX file");
  testing::WriteFile(dir_.Sub("junk/train-labels-idx1-ubyte"), "nor this");
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("junk") + " " + db, dir_), "not an IDX file");

  // A truncated copy of the real (gzipped) train images.
  fs::create_directory(dir_.Sub("cut"));
  std::string images = testing::ReadFile(std::string(kFashion) + "/train-images-idx3-ubyte.gz");
  testing::WriteFile(dir_.Sub("cut/train-images-idx3-ubyte.gz"), images.substr(0, images.size() / 3));
  fs::copy_file(std::string(kFashion) + "/train-labels-idx1-ubyte.gz", dir_.Sub("cut/train-labels-idx1-ubyte.gz"));
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("cut") + " " + db, dir_), "train-images-idx3-ubyte.gz");

  ExpectOneLineError(RunCommand(kPrep + " build " + kFashion + " " + db + " --bogus", dir_), "--bogus");
  EXPECT_FALSE(fs::exists(db));
  EXPECT_FALSE(fs::exists(db + ".partial"));
}

TEST_F(EndToEnd, TrainRejectsWhatIsNotAGranaryDb) {
  ExpectOneLineError(RunCommand(kTrain + " --db " + dir_.Sub("nothing"), dir_), "no such db directory");
  fs::create_directory(dir_.Sub("plain"));
  ExpectOneLineError(RunCommand(kTrain + " --db " + dir_.Sub("plain"), dir_), "is not a granary db");
  ExpectOneLineError(RunCommand(kTrain + " --db " + dir_.Sub("plain") + " --frobnicate 3", dir_), "--frobnicate");
  ExpectOneLineError(RunCommand(kTrain, dir_), "--db");
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// SIGKILL a build at several points: no db ever appears before the build is
// complete, and --resume finishes it with the content of an uninterrupted one.
TEST_F(EndToEnd, KilledBuildsLeaveNoDbAndResumeFinishesThem) {
  const std::string args = std::string(" build ") + kFashion + " ";
  const std::string opts = " --limit 20000 --zstd-level 19 --no-progress --json";
  auto reference = RunCommand(kPrep + args + dir_.Sub("reference") + opts, dir_);
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::string want = nlohmann::json::parse(reference.out)["content_hash"];

  const std::string db = dir_.Sub("db");
  int kills = 0;
  for (const char* seconds : {"0.3", "0.8", "1.4", "2.0", "2.7"}) {
    auto r = RunCommand(std::string("timeout -s KILL ") + seconds + " " + kPrep + args + db + opts + " --resume", dir_);
    if (r.exit_code == 128 + 9) {  // timeout(1) reports its SIGKILL as 137
      ++kills;
      EXPECT_FALSE(fs::exists(db)) << "killed after " << seconds << "s, yet " << db << " exists";
    } else {
      ASSERT_EQ(r.exit_code, 0) << r.err;
      break;  // finished before the kill
    }
  }
  EXPECT_GT(kills, 0);
  if (!fs::exists(db)) {
    auto done = RunCommand(kPrep + args + db + opts + " --resume", dir_);
    ASSERT_EQ(done.exit_code, 0) << done.err;
  }
  auto info = RunCommand(kPrep + " info " + db + " --json", dir_);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["content_hash"], want);
  EXPECT_EQ(RunCommand(kPrep + " verify " + db, dir_).exit_code, 0);
  EXPECT_FALSE(fs::exists(db + ".partial"));
}

// Two data-loss cases, as a user would type them.
TEST_F(EndToEnd, ForceNeverDeletesTheInputOrWhatIsNotADb) {
  const std::string raw = dir_.Sub("parent/raw");
  fs::create_directories(raw);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    fs::copy_file(std::string(kFashion) + "/" + name, raw + "/" + name);
  }
  fs::create_directory(dir_.Sub("notes"));
  testing::WriteFile(dir_.Sub("notes/todo.txt"), "keep me");
  const std::string opts = " --limit 100 --force --no-progress";
  ExpectOneLineError(RunCommand(kPrep + " build " + raw + " " + raw + opts, dir_), "is or contains the input");
  ExpectOneLineError(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("parent") + opts, dir_),
                     "is or contains the input");
  ExpectOneLineError(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("notes") + opts, dir_),
                     "is not a granary db");
  EXPECT_TRUE(fs::exists(raw + "/train-images-idx3-ubyte.gz"));
  EXPECT_EQ(testing::ReadFile(dir_.Sub("notes/todo.txt")), "keep me");
  // A db is what --force replaces; without it, prep says to pass it.
  ASSERT_EQ(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db") + opts, dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db") + " --no-progress", dir_),
                     "db: already exists (pass --force to replace it)");
  ASSERT_EQ(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db") + opts, dir_).exit_code, 0);
  EXPECT_EQ(RunCommand(kPrep + " verify " + dir_.Sub("db"), dir_).exit_code, 0);
}

TEST_F(EndToEnd, TwoBuildsOfOnePathNeverPublishACorruptDb) {
  const std::string db = dir_.Sub("out.db");
  const std::string build = kPrep + " build " + kFashion + " " + db + " --threads 1 --no-progress";
  // The first in the background; the second 0.3 s later, while the first runs
  // (a full Fashion-MNIST build takes over a second).
  auto r = RunCommand("{ (" + build + " 2>" + dir_.Sub("first.err") + "; echo $? >" + dir_.Sub("first.rc") +
                          ") & sleep 0.3; " + build + "; rc=$?; wait; exit $rc; }",
                      dir_);
  const int first = std::stoi(testing::ReadFile(dir_.Sub("first.rc")));
  const std::string first_err = testing::ReadFile(dir_.Sub("first.err"));
  // Exactly one of them builds; the other says who holds the path.
  EXPECT_EQ((first == 0) + (r.exit_code == 0), 1) << first_err << r.err;
  const std::string& loser = first == 0 ? r.err : first_err;
  EXPECT_NE(loser.find("being built by process"), std::string::npos) << loser;
  EXPECT_EQ(RunCommand(kPrep + " verify " + db, dir_).exit_code, 0);
  EXPECT_FALSE(fs::exists(db + ".partial"));
}

// The launcher never leaves a rank behind, however it ends.
TEST_F(EndToEnd, StoppingOrKillingTheLauncherLeavesNoRankBehind) {
  const std::string db = dir_.Sub("sig.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 2000 --no-progress", dir_).exit_code, 0);
  // A regex that matches the ranks' command lines (the launcher's plus
  // "--layout ... --rank R ...") but not the shell's own.
  const std::string ranks = "'" + dir_.Sub("sig[.]db --ranks 2 --epochs 1000 --json --layout") + "'";
  for (const char* sig : {"TERM", "KILL"}) {
    auto r = RunCommand("{ " + kTrain + " --db " + db + " --ranks 2 --epochs 1000 --json & L=$!; sleep 3; " +
                            "echo running $(pgrep -c -f " + ranks + "); kill -" + sig + " $L; wait $L; " +
                            "echo status $?; sleep 1; echo left $(pgrep -c -f " + ranks + "); }",
                        dir_);
    EXPECT_NE(r.out.find("running 2"), std::string::npos) << sig << ": " << r.out;
    EXPECT_NE(r.out.find(std::string("status ") + (sig[0] == 'T' ? "143" : "137")), std::string::npos)
        << sig << ": " << r.out;
    EXPECT_NE(r.out.find("left 0"), std::string::npos) << sig << ": " << r.out << r.err;
  }
}

TEST_F(EndToEnd, FlagsOutOfBoundsStopBeforeAnyRankStarts) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 100 --no-progress", dir_).exit_code, 0);
  for (const char* flag : {"--ranks 1000", "--batch-size -1", "--prefetch 1000000000", "--threads 100000",
                           "--epochs 0"}) {
    ExpectOneLineError(RunCommand(kTrain + " --db " + db + " " + flag, dir_), flag);
  }
  for (const char* flag : {"--threads 100000", "--threads 0", "--epochs 0", "--epochs -1", "--batch -1",
                           "--batch 0", "--prefetch 1000000000", "--prefetch 0"}) {
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    ExpectOneLineError(RunCommand(kLoader + " bench " + db + " " + flag, dir_), name);
  }
  // Within its own bound, --prefetch is checked against the memory it would take.
  ExpectOneLineError(RunCommand(kLoader + " bench " + db + " --prefetch 1000 --batch 1000000", dir_),
                     "more than half of this machine's");
  ExpectOneLineError(RunCommand(kLoader + " order " + db + " --epoch -1", dir_), "--epoch: must be >= 0");
  ExpectOneLineError(RunCommand(kPrep + " build " + kFashion + " " + dir_.Sub("x") + " --limit -1", dir_),
                     "--limit: must be >= 0");
  ExpectOneLineError(RunCommand(kPrep + " build " + kFashion + " " + dir_.Sub("x") + " --threads 100000", dir_),
                     "--threads");
}

// The whole --shards range works, and verify stays cheap with many
// shards (each shard's walk opens that shard only).
TEST_F(EndToEnd, TheMostShardsBuildAndVerify) {
  const std::string db = dir_.Sub("many.db");
  auto build = RunCommand("ulimit -S -n 1024; " + kPrep + " build " + kFashion + " " + db +
                              " --limit 4096 --shards 4096 --no-progress",
                          dir_);
  ASSERT_EQ(build.exit_code, 0) << build.err;
  auto verify = RunCommand("ulimit -S -n 1024; " + kPrep + " verify " + db, dir_);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("8192 of 8192 samples ok"), std::string::npos) << verify.out;
  EXPECT_EQ(RunCommand(kPrep + " build " + kFashion + " " + dir_.Sub("x") + " --shards 4097", dir_).exit_code, 2);
}

// A db is untrusted input; a manifest that lies about its counts
// ends every tool with one line and exit status 1, never an abort.
TEST_F(EndToEnd, ALyingManifestEndsEveryToolWithOneLine) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 300 --no-progress", dir_).exit_code, 0);
  const std::string manifest = db + "/manifest.json";
  const std::string honest = testing::ReadFile(manifest);
  for (const char* lie : {"1099511627776", "9223372036854775807", "-5"}) {
    std::string text = honest;
    for (size_t at = text.find("\"count\": 300"); at != std::string::npos; at = text.find("\"count\": 300", at)) {
      text.replace(at, 12, std::string("\"count\": ") + lie);
    }
    testing::WriteFile(manifest, text);
    for (const std::string& command : {kTrain + " --db " + db + " --ranks 1", kLoader + " bench " + db,
                                       kPrep + " info " + db}) {
      auto r = RunCommand(command, dir_);
      EXPECT_EQ(r.exit_code, 1) << lie << ": " << command << ": " << r.err;
      ExpectOneLineError(r, std::string(lie) == "-5" ? "not a non-negative integer" : "shard-00000.mdb");
    }
    EXPECT_EQ(RunCommand(kPrep + " verify " + db, dir_).exit_code, 1) << lie;
  }
}

// Names are bytes. A RAW path, db path, class name or rejected
// file name that is not UTF-8 (or holds a newline) never aborts a tool; JSON
// output stores it losslessly (store/json_text.h) and messages stay one line.
TEST_F(EndToEnd, NamesThatAreNotUtf8NeverAbortAndComeBackExactly) {
  const std::string raw = dir_.Sub("raw\xff");
  fs::create_directory(raw);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    fs::copy_file(std::string(kFashion) + "/" + name, raw + "/" + name);
  }
  const std::string db = dir_.Sub("db\xfe");
  auto build = RunCommand(kPrep + " build '" + raw + "' '" + db + "' --limit 200 --json --no-progress", dir_);
  ASSERT_EQ(build.exit_code, 0) << build.err;
  const nlohmann::json summary = ParseJson(build.out);
  ASSERT_FALSE(summary.is_discarded()) << build.out;
  EXPECT_EQ(summary["db"].get<std::string>(), db);
  auto info = RunCommand(kPrep + " info '" + db + "' --json", dir_);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(ParseJson(info.out)["source"]["path"].get<std::string>(), raw);
  EXPECT_EQ(RunCommand(kPrep + " verify '" + db + "'", dir_).exit_code, 0);
  auto train = RunCommand(kTrain + " --db '" + db + "' --ranks 1 --epochs 1 --eval-split '' --json", dir_);
  EXPECT_EQ(train.exit_code, 0) << train.err;
  EXPECT_EQ(ParseJson(train.out)["config"]["data"]["db"].get<std::string>(), db);

  // A CSV whose name holds a newline and a non-UTF-8 byte, with Latin-1
  // labels and one bad row: the rejected row is named on one line.
  const std::string csv = dir_.Sub("t\nx\xff.csv");
  std::string rows = "a,kind\n";
  for (int i = 0; i < 40; ++i) rows += std::to_string(i) + (i % 2 ? ",caf\xe9\n" : ",th\xe9\n");
  rows += "oops,caf\xe9\n";
  testing::WriteFile(csv, rows);
  auto csv_build = RunCommand(kPrep + " build '" + csv + "' '" + dir_.Sub("csvdb") +
                                  "' --label kind --max-rejects 0.5 --no-progress",
                              dir_);
  ASSERT_EQ(csv_build.exit_code, 0) << csv_build.err;
  EXPECT_NE(csv_build.err.find("rejected " + dir_.Sub("t\\nx\\xff.csv") + ":42"), std::string::npos) << csv_build.err;
  auto csv_info = RunCommand(kPrep + " info '" + dir_.Sub("csvdb") + "' --json", dir_);
  const nlohmann::json classes = ParseJson(csv_info.out)["class_names"];
  EXPECT_EQ(classes, nlohmann::json({"caf\xe9", "th\xe9"})) << csv_info.out;
}

// A full disk is named as such (LMDB reports its short write as
// EIO), leaves no db, and --resume after freeing space finishes with the
// content of an uninterrupted build. The disk is a 2 MiB tmpfs mounted in a
// private mount namespace (unshare), grown to free space.
TEST_F(EndToEnd, AFullDiskSaysSoAndResumeFinishesAfterFreeingSpace) {
  if (RunCommand("unshare -rm true", dir_).exit_code != 0) GTEST_SKIP() << "no unshare: user namespaces are off";
  const std::string opts = std::string(" --limit 20000 --no-progress --json");
  auto reference = RunCommand(kPrep + " build " + kFashion + " " + dir_.Sub("reference") + opts, dir_);
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::string disk = dir_.Sub("disk");
  fs::create_directory(disk);
  const std::string build = kPrep + " build " + kFashion + " " + disk + "/db" + opts;
  auto r = RunCommand("unshare -rm sh -c 'mount -t tmpfs -o size=2m tmpfs " + disk + " && " + build +
                          "; echo first $? >&2; test -e " + disk + "/db && echo db exists >&2; " +
                          "mount -o remount,size=64m " + disk + " && " + build + " --resume'",
                      dir_);
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("first 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("db exists"), std::string::npos) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["content_hash"], nlohmann::json::parse(reference.out)["content_hash"]);
}

// A shard that fills its map (--max-shard-mb) fails the build with
// one line naming the shard and the flag, leaves no db, and --resume with a
// larger limit finishes with the content of an uninterrupted build. Without a
// limit the map grows from a small start, so a build also runs under an
// address-space limit (it reserved 64 GiB per shard and failed there before).
TEST_F(EndToEnd, AShardThatFillsItsMapFailsClearlyAndResumesWithRoom) {
  const std::string opts = " --limit 20000 --no-progress --json";
  auto reference = RunCommand(kPrep + " build " + kFashion + " " + dir_.Sub("reference") + opts, dir_);
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::string hash = nlohmann::json::parse(reference.out)["content_hash"];

  const std::string db = dir_.Sub("db");
  auto full = RunCommand(kPrep + " build " + kFashion + " " + db + opts + " --max-shard-mb 4", dir_);
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_NE(full.err.find("train/shard-00000.mdb: the shard would outgrow --max-shard-mb 4 (use more --shards"),
            std::string::npos)
      << full.err;
  EXPECT_EQ(std::count(full.err.begin(), full.err.end(), '\n'), 1) << full.err;
  EXPECT_FALSE(fs::exists(db));
  auto resumed = RunCommand(kPrep + " build " + kFashion + " " + db + opts + " --resume --max-shard-mb 64", dir_);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(resumed.out)["content_hash"], hash);

  auto limited = RunCommand("ulimit -v 3000000 && " + kPrep + " build " + kFashion + " " + dir_.Sub("limited") + opts +
                                " --threads 2",
                            dir_);
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_EQ(nlohmann::json::parse(limited.out)["content_hash"], hash);
}

// Bf16 (CPU autocast) and channels-last train: the loss falls, and
// both sync methods give the same numbers under them.
TEST_F(EndToEnd, Bf16AndChannelsLastLowerTheLoss) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --epochs 2 --eval-split '' --optimizer sgd --lr 0.02 --momentum 0.9 " +
                           "--precision bf16 --channels-last --dropout 0 --ranks 2";
  auto j = TrainJson(args, dir_);
  ASSERT_EQ(j["epochs"].size(), 2u);
  EXPECT_LT(j["epochs"][1]["train_loss"].get<double>(), j["epochs"][0]["train_loss"].get<double>());
  EXPECT_LT(j["epochs"][1]["train_loss"].get<double>(), 1.0);
  EXPECT_EQ(j["config"]["model"]["precision"], "bf16");
  // The epoch's time splits into compute, sync wait and data stall (plus a little bookkeeping).
  for (const auto& e : j["epochs"]) {
    const double parts = e["compute_fraction"].get<double>() + e["comm_fraction"].get<double>() +
                         e["stall_fraction"].get<double>();
    EXPECT_GT(e["compute_fraction"].get<double>(), 0.3) << e;
    EXPECT_GT(parts, 0.8) << e;
    EXPECT_LE(parts, 1.0) << e;
  }
  auto bucketed = TrainJson(args + " --sync bucketed", dir_);
  EXPECT_EQ(bucketed["epochs"][1]["train_loss"], j["epochs"][1]["train_loss"]);
}

// A CSV db trains. Two classes that a linear rule over features of
// very different scales separates; the MLP standardises the features with the
// training split's statistics and evaluates on the held-out split that
// --val-fraction makes, found by --eval-split auto.
TEST_F(EndToEnd, ACsvDbTrainsAnMlpAndEvaluatesOnItsValSplit) {
  std::string rows = "a,b,c,y\n";
  for (int i = 0; i < 600; ++i) {
    const double a = (i * 37 % 101) / 101.0, b = (i * 53 % 97) / 97.0;
    const int y = a + b > 1.0 ? 1 : 0;
    rows += std::to_string(a * 1000) + "," + std::to_string(b * 0.01) + "," + std::to_string(i % 7) + "," +
            std::to_string(y) + "\n";
  }
  testing::WriteFile(dir_.Sub("t.csv"), rows);
  const std::string db = dir_.Sub("db");
  auto prep = RunCommand(kPrep + " build " + dir_.Sub("t.csv") + " " + db + " --label y --val-fraction 0.2", dir_);
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  auto j = TrainJson("--db " + db + " --ranks 2 --epochs 30 --batch-size 32 --lr 0.01", dir_);
  EXPECT_EQ(j["config"]["model"]["name"], "mlp");
  EXPECT_EQ(j["config"]["data"]["input_field"], "features");
  EXPECT_EQ(j["config"]["data"]["eval_split"], "val");
  ASSERT_EQ(j["epochs"].size(), 30u);
  const auto& last = j["epochs"][29];
  EXPECT_GT(last["test_samples"].get<int>(), 60);
  EXPECT_GT(last["test_accuracy"].get<double>(), 0.9) << last;
  // The wrong model for the db: one line naming the db, the field and the shape, before any rank starts.
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --model convnet", dir_), "field 'features'");
  auto r = RunCommand(kTrain + " --db " + db + " --model resnet", dir_);
  EXPECT_NE(r.err.find(db), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[3]"), std::string::npos) << r.err;
}

// The BatchNorm models train under data parallelism, with a schedule, warm-up,
// linear scaling and label smoothing; what runs is printed.
TEST_F(EndToEnd, ResNetAndMobileNetTrainOnTwoRanksWithARecipe) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 1000 --no-progress", dir_).exit_code, 0);
  for (const char* model : {"resnet", "mobilenet"}) {
    auto j = TrainJson(std::string("--db ") + db + " --model " + model + " --width 0.5 --ranks 2 --epochs 3 " +
                           "--optimizer sgd --lr 0.05 --momentum 0.9 --schedule cosine --warmup-epochs 1 " +
                           "--lr-scaling linear --base-batch 32 --label-smoothing 0.1 --eval-split ''",
                       dir_);
    ASSERT_EQ(j["epochs"].size(), 3u) << model;
    EXPECT_EQ(j["config"]["model"]["name"], model);
    EXPECT_LT(j["epochs"][2]["train_loss"].get<double>(), j["epochs"][0]["train_loss"].get<double>()) << model;
    // Peak 0.05 x 64 / 32 after one epoch of warm-up, cosine to ~0 at the end.
    EXPECT_NEAR(j["epochs"][0]["lr"].get<double>(), 0.1, 1e-9) << model;
    EXPECT_LT(j["epochs"][2]["lr"].get<double>(), 0.01) << model;
  }
}

// Bring your own model. A module scripted in Python trains on a
// Fashion-MNIST db with the same loop and sync; --save writes the trained
// model, which Python loads and which classifies the test split as well as
// train's own evaluation said. A module whose output does not match the
// db's classes, or a file that is not one, is refused before any rank starts.
TEST_F(EndToEnd, APythonTorchScriptModelTrainsAndTheSavedModelRunsInPython) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 1000 --no-progress", dir_).exit_code, 0);
  testing::WriteFile(dir_.Sub("make.py"),
                     "import sys, torch\n"
                     "torch.manual_seed(0)\n"
                     "classes = int(sys.argv[2])\n"
                     "net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(),\n"
                     "                          torch.nn.Linear(64, classes))\n"
                     "torch.jit.script(net).save(sys.argv[1])\n");
  const std::string make = "/usr/bin/python3 " + dir_.Sub("make.py") + " ";
  ASSERT_EQ(RunCommand(make + dir_.Sub("net.pt") + " 10", dir_).exit_code, 0);
  ASSERT_EQ(RunCommand(make + dir_.Sub("five.pt") + " 5", dir_).exit_code, 0);

  auto j = TrainJson("--db " + db + " --model " + dir_.Sub("net.pt") + " --ranks 2 --epochs 4 --optimizer sgd " +
                         "--lr 0.05 --momentum 0.9 --save " + dir_.Sub("trained.pt"),
                     dir_);
  ASSERT_EQ(j["epochs"].size(), 4u);
  EXPECT_LT(j["epochs"][3]["train_loss"].get<double>(), j["epochs"][0]["train_loss"].get<double>());
  const double accuracy = j["epochs"][3]["test_accuracy"].get<double>();
  EXPECT_GT(accuracy, 0.6) << j["epochs"];  // 0.75 here; chance is 0.1
  // Python: the saved model on the db's test split, read with tools/granary_db.py.
  testing::WriteFile(dir_.Sub("check.py"),
                     "import sys, torch\n"
                     "sys.path.insert(0, '" GRANARY_SOURCE_DIR "/tools')\n"
                     "import granary_db\n"
                     "db = granary_db.Db(sys.argv[1])\n"
                     "split = db['test']\n"
                     "m = torch.jit.load(sys.argv[2])\n"
                     "right = 0\n"
                     "for i in range(len(split)):\n"
                     "    s = split[i]\n"
                     "    x = torch.tensor(s['image'], dtype=torch.float32).reshape(1, 1, 28, 28) / 255\n"
                     "    right += int(m(x).argmax(1).item() == int(s['label']))\n"
                     "print(right / len(split))\n");
  auto check = RunCommand("/usr/bin/python3 " + dir_.Sub("check.py") + " " + db + " " + dir_.Sub("trained.pt"), dir_);
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NEAR(std::stod(check.out), accuracy, 1e-6) << check.out;

  const std::string outputs = " --save " + dir_.Sub("out.pt") + " --metrics " + dir_.Sub("out.jsonl") +
                              " --report " + dir_.Sub("out.html");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --model " + dir_.Sub("five.pt") + outputs, dir_),
                     "gives [2, 5], training needs [2, 10] (10 classes)");
  for (const char* name : {"out.pt", "out.jsonl", "out.html"}) EXPECT_FALSE(fs::exists(dir_.Sub(name))) << name;
  testing::WriteFile(dir_.Sub("junk.pt"), "junk");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --model " + dir_.Sub("junk.pt"), dir_),
                     "not a TorchScript module");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --save " + dir_.Sub("no/such/dir/m.pt"), dir_),
                     "--save " + dir_.Sub("no/such/dir/m.pt") + ": no directory");
}

// Seeing the run. --metrics writes a JSON line every --log-every
// steps and one per epoch; --report writes one HTML page whose charts a
// headless Chromium (Debian's, installed by tools/setup) renders; a progress
// line is drawn on a terminal (a pty from script(1)) and never otherwise.
TEST_F(EndToEnd, MetricsReportAndProgressLine) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 640 --no-progress", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --ranks 2 --epochs 2 --batch-size 64 --log-every 4 --metrics " +
                           dir_.Sub("run.jsonl") + " --report " + dir_.Sub("run.html");
  auto r = RunCommand(kTrain + " " + args, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("\033[K"), std::string::npos) << "a progress line when stderr is not a terminal";

  std::string metrics;
  ASSERT_TRUE(ReadFile(dir_.Sub("run.jsonl"), &metrics).ok());
  int steps = 0, epochs = 0;
  for (size_t at = 0; at < metrics.size();) {
    const size_t nl = metrics.find('\n', at);
    ASSERT_NE(nl, std::string::npos);
    const auto line = nlohmann::json::parse(metrics.substr(at, nl - at));
    if (line["type"] == "step") {
      ++steps;
      EXPECT_EQ(line["global_step"].get<int>() % 4, 0) << line;
      EXPECT_GT(line["loss"].get<double>(), 0) << line;
    } else {
      ++epochs;
      EXPECT_EQ(line["type"], "epoch");
      EXPECT_TRUE(line.contains("test_accuracy")) << line;
    }
    at = nl + 1;
  }
  EXPECT_EQ(steps, 2 * 10 / 4);  // 640 samples / 64 = 10 steps an epoch: steps 4, 8, 12, 16, 20
  EXPECT_EQ(epochs, 2);

  auto dom = RunCommand("timeout 120 chromium --headless --no-sandbox --disable-gpu --dump-dom file://" +
                            dir_.Sub("run.html"),
                        dir_);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  for (const char* id : {"loss", "accuracy", "throughput", "time", "lr"}) {
    const size_t figure = dom.out.find("id=\"" + std::string(id) + "\"");
    ASSERT_NE(figure, std::string::npos) << id;
    const size_t svg = dom.out.find("<svg", figure), polyline = dom.out.find("<polyline", figure);
    EXPECT_LT(svg, dom.out.find("</figure>", figure)) << id;
    EXPECT_LT(polyline, dom.out.find("</svg>", figure)) << id;
  }

  auto tty = RunCommand("script -qec '" + kTrain + " " + args + "' /dev/null", dir_);
  ASSERT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_NE(tty.out.find("\033[Kepoch 2/2  step 10/10"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("ETA"), std::string::npos) << tty.out;
}

// A slow disk (fsync sleeps 3 s, by a preloaded shim) under
// --timeout 2. Rank 0 writes checkpoints in the background, so its peer never
// waits for its disk in a collective; one due while another is being written
// is skipped with a note; the run's last is written whole before it ends.
TEST_F(EndToEnd, ASlowCheckpointDiskDoesNotEndTheRun) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string ck = dir_.Sub("ck");
  auto r = RunCommand(std::string("LD_PRELOAD=") + GRANARY_SLOW_FSYNC_LIB + " GRANARY_TEST_FSYNC_DELAY_MS=3000 " +
                          kTrain + " --db " + db + " --ranks 2 --epochs 2 --timeout 2 --eval-split '' " +
                          "--checkpoint-dir " + ck + " --checkpoint-every 3 --json",
                      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("skipped: the one before is still being written"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["epochs"].size(), 2u);
  // The newest checkpoint is the run's end (FORMAT.md: magic, u32 header length, JSON header).
  auto latest = RunCommand("(ls " + ck + " | tail -1)", dir_);
  ASSERT_EQ(latest.out.size(), 21u) << latest.out << latest.err;  // step-NNNNNNNNNN.ckpt
  const std::string file = testing::ReadFile(ck + "/" + latest.out.substr(0, 20));
  ASSERT_GT(file.size(), 12u);
  uint32_t length = 0;
  for (int i = 3; i >= 0; --i) length = length << 8 | static_cast<uint8_t>(file[8 + i]);
  const auto header = nlohmann::json::parse(file.substr(12, length));
  EXPECT_EQ(header["at"]["epoch"], 2) << header["at"];
  EXPECT_EQ(header["at"]["position"], 0) << header["at"];
}

// A run killed in the middle of an epoch (SIGKILL to the launcher,
// so every rank dies at once) and resumed from its last checkpoint ends with
// the epoch losses and the weights of a run that was never interrupted,
// exactly: dropout included. Resumed on one rank, it finishes and says what
// changed.
TEST_F(EndToEnd, AKilledRunResumesExactlyAndOnAnotherWorldSize) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 3000 --no-progress", dir_).exit_code, 0);
  // 3,000 samples / batch 64: 47 steps an epoch; checkpoints every 10 steps.
  const std::string recipe = "--db " + db + " --epochs 3 --optimizer sgd --lr 0.02 --momentum 0.9 " +
                             "--checkpoint-every 10 --json";
  const std::string args = recipe + " --ranks 2";
  auto whole = TrainJson(args + " --checkpoint-dir " + dir_.Sub("whole"), dir_);
  ASSERT_EQ(whole["epochs"].size(), 3u);

  // Killed once step 50 (epoch 2's 4th step) is checkpointed.
  const std::string ck = dir_.Sub("killed");
  auto killed = RunCommand("(" + kTrain + " " + args + " --checkpoint-dir " + ck + " > /dev/null 2>&1 & pid=$!; " +
                               "for i in $(seq 3000); do ls " + ck + "/step-00000000[5-9][0-9].ckpt >/dev/null 2>&1 " +
                               "&& break; sleep 0.01; done; kill -9 $pid; wait $pid; echo $?)",
                           dir_);
  ASSERT_EQ(killed.out, "137\n") << killed.err;
  auto latest = RunCommand("(ls " + ck + " | tail -1)", dir_);  // (RunCommand's </dev/null is for the group)
  const int step = std::stoi(latest.out.substr(5, 10));
  ASSERT_GE(step, 50) << latest.out;
  ASSERT_NE(step % 47, 0) << "not in the middle of an epoch: " << latest.out;
  const std::string mid = dir_.Sub("mid.ckpt");  // kept: the resumed run replaces the dir's checkpoints
  ASSERT_EQ(RunCommand("cp " + ck + "/" + latest.out.substr(0, 20) + " " + mid, dir_).exit_code, 0);

  auto resumed = TrainJson(args + " --checkpoint-dir " + ck + " --resume", dir_);
  ASSERT_FALSE(resumed["epochs"].empty());
  const size_t first = 3 - resumed["epochs"].size();  // the epoch it resumed in, 0-based
  EXPECT_EQ(first, static_cast<size_t>(step / 47));
  for (size_t i = 0; i < resumed["epochs"].size(); ++i) {
    const auto& a = whole["epochs"][first + i];
    const auto& b = resumed["epochs"][i];
    EXPECT_EQ(a["epoch"], b["epoch"]);
    EXPECT_EQ(a["train_loss"], b["train_loss"]) << "epoch " << a["epoch"];
    EXPECT_EQ(a["test_loss"], b["test_loss"]) << "epoch " << a["epoch"];
    EXPECT_EQ(a["weights_hash"], b["weights_hash"]) << "epoch " << a["epoch"];
  }

  // The same checkpoint on one rank: the rest of the epoch, then the next.
  auto one = RunCommand(kTrain + " " + recipe + " --ranks 1 --checkpoint-dir " + dir_.Sub("one") + " --resume " + mid,
                        dir_);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("2 ranks -> 1: per-rank batch 32 -> 64; global batch 64"), std::string::npos) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  EXPECT_EQ(j["epochs"].size(), resumed["epochs"].size());
  EXPECT_NEAR(j["epochs"].back()["test_loss"].get<double>(), whole["epochs"][2]["test_loss"].get<double>(), 0.1);

  // Refused with one line: another db, another recipe, a damaged file.
  const std::string other = dir_.Sub("other");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + other + " --limit 500 --no-progress", dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kTrain + " --db " + other + " --ranks 2 --checkpoint-dir " + ck + " --resume", dir_),
                     "the checkpoint is of another db");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --optimizer sgd --lr 0.5 --momentum 0.9 --checkpoint-dir " +
                                    ck + " --resume",
                                dir_),
                     "differs in optim.lr");
  ASSERT_EQ(RunCommand("(printf x | dd of=" + mid + " bs=1 seek=100000 conv=notrunc)", dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kTrain + " " + args + " --checkpoint-dir " + ck + " --resume " + mid, dir_),
                     "not a usable checkpoint");
}

// Many machines, here two launchers on 127.0.0.1 (one rank each,
// --nnodes 2), train exactly as one launcher running both ranks; so do two
// processes started with torchrun's environment (RANK, WORLD_SIZE, ...).
TEST_F(EndToEnd, TwoNodesAndTorchrunsEnvironmentTrainAsOneLauncher) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 1000 --no-progress", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --epochs 2 --threads 1 --pin off --json";
  auto one = TrainJson(args + " --ranks 2", dir_);
  ASSERT_EQ(one["epochs"].size(), 2u);

  const std::string node = kTrain + " " + args + " --ranks 1 --nnodes 2 --master-addr 127.0.0.1 --master-port " +
                           std::to_string(FreePort()) + " --node-rank ";
  auto two = RunCommand("(" + node + "1 > " + dir_.Sub("node1.json") + " & " + node + "0; wait)", dir_);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto j = nlohmann::json::parse(two.out);
  EXPECT_EQ(j["ranks"], 2);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(j["epochs"][e]["train_loss"], one["epochs"][e]["train_loss"]) << e;
    EXPECT_EQ(j["epochs"][e]["weights_hash"], one["epochs"][e]["weights_hash"]) << e;
  }

  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(FreePort());
  auto torchrun = RunCommand("(" + env + " RANK=1 LOCAL_RANK=1 " + kTrain + " " + args + " > /dev/null & " + env +
                                 " RANK=0 LOCAL_RANK=0 " + kTrain + " " + args + "; wait)",
                             dir_);
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
  auto t = nlohmann::json::parse(torchrun.out);
  EXPECT_EQ(t["epochs"][1]["weights_hash"], one["epochs"][1]["weights_hash"]);

  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --nnodes 2", dir_), "--nnodes 2 needs --master-port");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --nnodes 2 --node-rank 2 --master-port 1", dir_),
                     "--node-rank 2");
}

// On one machine the ranks meet through a FileStore on a memfd, so
// no rendezvous port is opened at all; every TCP socket the ranks hold (Gloo's
// connections) is on the loopback address. (LibTorch 1.13's TCPStore listened
// on every interface.)
TEST_F(EndToEnd, OnOneMachineTheRanksHoldOnlyLoopbackSockets) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string start = "{ " + kTrain + " --db " + db + " --ranks 2 --epochs 1000 & echo $! > " + dir_.Sub("pid");
  ASSERT_EQ(RunCommand(start + "; }", dir_).exit_code, 0);
  const int pid = std::stoi(testing::ReadFile(dir_.Sub("pid")));
  // TCP sockets by inode: local address (hex, as /proc/net/tcp{,6} shows it).
  auto tcp_sockets = [] {
    std::map<std::string, std::string> local;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::istringstream lines(testing::ReadFile(table));
      std::string line;
      std::getline(lines, line);  // the header
      while (std::getline(lines, line)) {
        std::istringstream f(line);
        std::string slot, address, remote, state, queues, timer, retransmits, uid, timeout, inode;
        f >> slot >> address >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
        local[inode] = address.substr(0, address.find(':'));
      }
    }
    return local;
  };
  std::vector<std::string> addresses;  // of the ranks' TCP sockets
  for (int tries = 0; tries < 600 && addresses.size() < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    addresses.clear();
    const auto local = tcp_sockets();
    std::istringstream ranks(testing::ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                                               "/children"));
    for (std::string rank; ranks >> rank;) {
      std::error_code ec;
      for (const auto& fd : fs::directory_iterator("/proc/" + rank + "/fd", ec)) {
        const std::string target = fs::read_symlink(fd.path(), ec).string();
        if (target.rfind("socket:[", 0) != 0) continue;
        const auto it = local.find(target.substr(8, target.size() - 9));
        if (it != local.end()) addresses.push_back(it->second);
      }
    }
  }
  ::kill(pid, SIGTERM);
  for (int tries = 0; tries < 200 && ::kill(pid, 0) == 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(addresses.size(), 2u) << "the ranks never connected";
  const std::set<std::string> loopback = {"0100007F", "00000000000000000000000001000000",
                                          "0000000000000000FFFF00000100007F"};
  for (const std::string& a : addresses) EXPECT_EQ(loopback.count(a), 1u) << "a rank's socket on " << a;
}

// A rank that hangs (SIGSTOP) ends the run within --timeout, with
// a line naming it, non-zero, and no process left; a rendezvous port already
// in use is one clear error at once.
TEST_F(EndToEnd, AHungRankEndsTheRunWithinTheTimeoutAndABusyPortIsNamed) {
  const std::string db = dir_.Sub("hang.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string ranks = "'" + dir_.Sub("hang[.]db --ranks 2 --epochs 1000 --timeout 5 --layout") + "' ";
  auto r = RunCommand("{ " + kTrain + " --db " + db + " --ranks 2 --epochs 1000 --timeout 5 > /dev/null & L=$!; " +
                          "sleep 4; pkill -STOP -f " + ranks + "-n; start=$(date +%s); wait $L; echo status $?; " +
                          "echo seconds $(( $(date +%s) - start )); sleep 1; echo left $(pgrep -c -f " + ranks + "); }",
                      dir_);
  EXPECT_NE(r.out.find("status 1"), std::string::npos) << r.out << r.err;
  const size_t at = r.out.find("seconds ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_LE(std::stoi(r.out.substr(at + 8)), 5 + 5) << r.out;  // --timeout, slack
  EXPECT_NE(r.out.find("left 0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("train: rank 1 made no progress for "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its process is stopped"), std::string::npos) << r.err;

  const int port = FreePort();
  auto busy = RunCommand("python3 -c 'import socket,subprocess,sys; s=socket.socket(); "
                         "s.bind((\"127.0.0.1\", " + std::to_string(port) + ")); s.listen(); "
                         "sys.exit(subprocess.call(sys.argv[1:]))' " +
                             kTrain + " --db " + db + " --ranks 2 --master-port " + std::to_string(port),
                         dir_);
  EXPECT_NE(busy.exit_code, 0);
  EXPECT_NE(busy.err.find("Address already in use"), std::string::npos) << busy.err;
}

// Across machines (two launchers on 127.0.0.1): a rank on node 1
// that hangs or is killed ends both launchers within --timeout (and a little),
// node 1's naming it; a master that never answers is one line within --timeout.
TEST_F(EndToEnd, ARankThatHangsOrDiesOnAnotherNodeEndsBothLaunchers) {
  const std::string db = dir_.Sub("nodes.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 2000 --no-progress", dir_).exit_code, 0);
  for (const std::string signal : {"STOP", "KILL"}) {
    const std::string node = kTrain + " --db " + db + " --epochs 1000 --threads 1 --timeout 5 --ranks 1 --nnodes 2 " +
                             "--master-addr 127.0.0.1 --master-port " + std::to_string(FreePort()) + " --node-rank ";
    const std::string rank1 = "'" + dir_.Sub("nodes[.]db .*[-]-node-rank 1 [-]-layout") + "'";
    auto r =
        RunCommand("{ " + node + "1 > /dev/null 2> " + dir_.Sub("node1.err") + " & L1=$!; " + node +
                       "0 > /dev/null 2> " + dir_.Sub("node0.err") + " & L0=$!; sleep 5; pkill -" + signal + " -f " +
                       rank1 + "; start=$(date +%s); wait $L0; echo node0 $? $(( $(date +%s) - start ));" +
                       " wait $L1; echo node1 $? $(( $(date +%s) - start )); sleep 1; " + "echo left $(pgrep -c -f '" +
                       dir_.Sub("nodes[.]db .*[-]-layout") + "'); }",
                   dir_);
    int status0 = -1, seconds0 = 99, status1 = -1, seconds1 = 99, left = -1;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "node0 %d %d\nnode1 %d %d\nleft %d", &status0, &seconds0, &status1, &seconds1,
                          &left),
              5)
        << r.out << r.err;
    EXPECT_NE(status0, 0) << signal;
    EXPECT_NE(status1, 0) << signal;
    EXPECT_LE(seconds0, 5 + 5) << signal;  // --timeout, slack
    EXPECT_LE(seconds1, 5 + 5) << signal;
    EXPECT_EQ(left, 0) << signal;
    const std::string err1 = testing::ReadFile(dir_.Sub("node1.err"));
    EXPECT_NE(err1.find(signal == "STOP" ? "rank 1 on node 1 made no progress for"
                                         : "rank 1 on node 1 was killed by signal 9"),
              std::string::npos)
        << err1;
  }

  const int port = FreePort();
  auto lonely = RunCommand("{ start=$(date +%s); " + kTrain + " --db " + db + " --ranks 1 --nnodes 2 --node-rank 1 " +
                               "--master-addr 127.0.0.1 --master-port " + std::to_string(port) +
                               " --timeout 3; echo status $? seconds $(( $(date +%s) - start )); }",
                           dir_);
  EXPECT_NE(lonely.out.find("status 1 "), std::string::npos) << lonely.out;
  EXPECT_LE(std::stoi(lonely.out.substr(lonely.out.find("seconds ") + 8)), 3 + 5) << lonely.out;
  ExpectOneLineError(testing::CommandResult{1, "", lonely.err}, "rendezvous with 127.0.0.1:" + std::to_string(port));
}

// --tune-only measures the layouts and marks the fastest, trying
// what changes the numerics only when allowed; --tune then trains in the
// chosen layout, and its probes leave no output file behind.
TEST_F(EndToEnd, TuneMeasuresLayoutsAndTrainsWithTheFastest) {
  const std::string db = dir_.Sub("tune.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 3000 --no-progress", dir_).exit_code, 0);
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

// Evaluation is split over the ranks: every test sample counted once, also
// when the split does not divide by the ranks (999 over 2 and over 4).
TEST_F(EndToEnd, EvaluationSharesTheSplitOverRanksCountingEachSampleOnce) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(RunCommand(kPrep + " build " + kFashion + " " + db + " --limit 999 --no-progress", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --epochs 1 --dropout 0 --batch-size 36 --oversubscribe";
  auto one = TrainJson(args + " --ranks 1", dir_);
  for (const char* ranks : {"2", "4"}) {
    auto j = TrainJson(args + " --ranks " + ranks, dir_);
    EXPECT_EQ(j["epochs"][0]["test_samples"], 999) << ranks;
    EXPECT_NEAR(j["epochs"][0]["test_accuracy"].get<double>(), one["epochs"][0]["test_accuracy"].get<double>(), 0.05)
        << ranks;
  }
}

}  // namespace
}  // namespace granary
