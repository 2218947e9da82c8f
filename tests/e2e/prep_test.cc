// End to end, prep build and the tools over a db: crashes, misuse and hostile inputs lose nothing.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

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

  ExpectOneLineError(PrepFashion(db, "--bogus", dir_), "--bogus");
  // `prep build photos/a/*.jpg db`: the shell gives each file the pattern matched.
  fs::create_directories(dir_.Sub("photos/a"));
  std::string files;
  for (const char* name : {"1.jpg", "2.jpg", "3.jpg"}) {
    testing::WriteFile(dir_.Sub("photos/a/") + name, "a jpeg");
    files += dir_.Sub("photos/a/") + name + " ";
  }
  ExpectOneLineError(RunCommand(kPrep + " build " + files + db, dir_),
                     "prep build takes one RAW and one DB, and was given 4 paths (" + dir_.Sub("photos/a/1.jpg") +
                         ", " + dir_.Sub("photos/a/2.jpg") + ", ...): where a shell pattern (RAW/*.jpg) gave the "
                         "files it matched, name the folder that holds them");
  EXPECT_EQ(testing::ReadFile(dir_.Sub("photos/a/2.jpg")), "a jpeg");
  EXPECT_FALSE(fs::exists(db));
  EXPECT_FALSE(fs::exists(db + ".partial"));
}

// What a build notes (files it left out, classes with no image, what the
// images were: gray, smaller than --size) is kept in the manifest and shown
// by `prep info` and `--json`; a failed build with --json prints an error
// object, not nothing.
TEST_F(EndToEnd, ABuildsNotesAreKeptAndAFailedJsonBuildSaysWhy) {
  const std::string raw = dir_.Sub("raw");
  fs::create_directories(raw + "/a");
  fs::create_directories(raw + "/empty");
  fs::copy_file(std::string(kFashion) + "/train-labels-idx1-ubyte.gz", raw + "/a/notes.gz");  // no image extension
  ASSERT_EQ(PrepFashion(dir_.Sub("one.db"), "--limit 1 --no-progress", dir_).exit_code, 0);
  const std::string png = kPrep + " cat " + dir_.Sub("one.db") + " --index 0 --png " + raw + "/a/1.png";
  ASSERT_EQ(RunCommand(png, dir_).exit_code, 0);
  const std::string db = dir_.Sub("db");
  auto built = RunCommand(kPrep + " build " + raw + " " + db + " --size 8 --json", dir_);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const auto j = nlohmann::json::parse(built.out);
  EXPECT_EQ(j["ok"], true);
  ASSERT_EQ(j["notes"].size(), 3u) << j["notes"];
  const std::string manifest = testing::ReadFile(db + "/manifest.json");
  EXPECT_NE(manifest.find("without a .jpg/.jpeg/.png/.webp extension: a/notes.gz"), std::string::npos) << manifest;
  auto info = RunCommand(kPrep + " info " + db, dir_);
  EXPECT_NE(info.out.find("notes        3"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("1 class(es) with no image in train: empty"), std::string::npos) << info.out;
  // The image is Fashion-MNIST's: 28 x 28 and gray, stored as RGB unless --channels 1, enlarged past --size 28.
  const std::string gray = "every image decoded (1) is grayscale, stored as 3 equal channels";
  EXPECT_NE(info.out.find(gray), std::string::npos) << info.out;
  auto enlarged = RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db1") + " --size 32x40 --channels 1", dir_);
  ASSERT_EQ(enlarged.exit_code, 0) << enlarged.err;
  EXPECT_EQ(enlarged.err.find(gray), std::string::npos) << enlarged.err;
  EXPECT_NE(enlarged.err.find("prep: note: every image decoded (1) is 28x28, smaller than --size 32x40: enlarged to it "
                              "(1.6x the pixels to store and train on); --size 28 keeps them as they are"),
            std::string::npos)
      << enlarged.err;
  auto failed = RunCommand(kPrep + " build " + dir_.Sub("missing") + " " + dir_.Sub("db2") + " --json", dir_);
  EXPECT_EQ(failed.exit_code, 1);
  const auto e = nlohmann::json::parse(failed.out, nullptr, false);
  ASSERT_TRUE(e.is_object()) << failed.out;
  EXPECT_EQ(e["ok"], false);
  EXPECT_NE(e["error"].get<std::string>().find("no such folder"), std::string::npos) << e;
}

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
  // A db is what --force replaces; built with other options, prep says to pass it.
  ASSERT_EQ(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db") + opts, dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db") + " --no-progress", dir_),
                     "db: was built with other options (limit: 100 -> 0): pass --force to rebuild it with these");
  ASSERT_EQ(RunCommand(kPrep + " build " + raw + " " + dir_.Sub("db") + opts, dir_).exit_code, 0);
  EXPECT_EQ(RunCommand(kPrep + " verify " + dir_.Sub("db"), dir_).exit_code, 0);
  // A db given as RAW (to copy it, or as if it were the raw data): said so, with its source, and nothing written.
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("db") + " " + dir_.Sub("copy") + " --no-progress", dir_),
                     dir_.Sub("db") + ": is a granary db (what prep build makes, this one from " + raw +
                         "), not raw data: train on it (train --db " + dir_.Sub("db") + ")");
  EXPECT_FALSE(fs::exists(dir_.Sub("copy")));
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
  EXPECT_EQ(PrepFashion(dir_.Sub("x"), "--shards 4097", dir_).exit_code, 2);
}

// A db is untrusted input; a manifest that lies about its counts
// ends every tool with one line and exit status 1, never an abort.
TEST_F(EndToEnd, ALyingManifestEndsEveryToolWithOneLine) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 300 --no-progress", dir_).exit_code, 0);
  const std::string manifest = db + "/manifest.json";
  // Its class counts, which would have to lie too, left out: the shards' own counts are what is checked.
  nlohmann::json without_counts = nlohmann::json::parse(testing::ReadFile(manifest));
  const nlohmann::json class_counts = without_counts["class_counts"];
  without_counts.erase("class_counts");
  const std::string honest = without_counts.dump(2);
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
  // With its class counts, the first lie shows there already.
  nlohmann::json lying = nlohmann::json::parse(honest);
  lying["splits"][0]["count"] = 301;
  lying["splits"][0]["shards"][0]["count"] = 301;
  lying["class_counts"] = class_counts;
  testing::WriteFile(manifest, lying.dump(2));
  ExpectOneLineError(RunCommand(kTrain + " --db " + db + " --ranks 1", dir_),
                     "class_counts.train: not one count for each of the db's 10 classes summing to the split's 301");
}

// Names are bytes. A RAW path, db path, class name or rejected
// file name that is not UTF-8 (or holds a newline) never aborts a tool; JSON
// output stores it losslessly (base/json_text.h) and messages stay one line.
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
// private mount namespace (unshare), grown to free space. The build says,
// from its first thousand samples on, that the db will not fit, long before
// the disk fills; the resumed one, which fits, says nothing of the kind.
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
  const size_t full = r.err.find("No space left on device");
  EXPECT_NE(full, std::string::npos) << r.err;
  const size_t warned = r.err.find("prep: warning: " + disk + "/db.partial: the db will need about ");
  EXPECT_LT(warned, full) << r.err;
  EXPECT_NE(r.err.find(" samples still to come, at the ", warned), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("free: it will fill before the db is complete", warned), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("prep: warning:", warned + 1), std::string::npos) << r.err;  // once
  EXPECT_NE(r.err.find("first 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("db exists"), std::string::npos) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Two JSON lines: the failed build's error object, then the resumed build's summary.
  const size_t newline = r.out.find('\n');
  ASSERT_NE(newline, std::string::npos) << r.out;
  const auto failed = nlohmann::json::parse(r.out.substr(0, newline));
  EXPECT_EQ(failed["ok"], false);
  EXPECT_NE(failed["error"].get<std::string>().find("free space on its disk, then add --resume"), std::string::npos)
      << failed;
  ASSERT_EQ(failed["warnings"].size(), 1u) << failed;
  EXPECT_NE(failed["warnings"][0].get<std::string>().find("the db will need about "), std::string::npos) << failed;
  const auto resumed = nlohmann::json::parse(r.out.substr(newline + 1));
  EXPECT_EQ(resumed["content_hash"], nlohmann::json::parse(reference.out)["content_hash"]);
  EXPECT_EQ(resumed["warnings"], nlohmann::json::array()) << resumed;
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

// A folder of many unreadable images stops once they are past --max-rejects
// (the build fails whatever the rest holds) instead of reading the rest,
// and says how to finish it; a resume over files changed since names the
// split and what changed.
TEST_F(EndToEnd, ManyRejectsStopTheBuildEarlyAndSayHowToFinishIt) {
  ASSERT_EQ(PrepFashion(dir_.Sub("one.db"), "--limit 1 --no-progress", dir_).exit_code, 0);
  ASSERT_EQ(RunCommand(kPrep + " cat " + dir_.Sub("one.db") + " --index 0 --png " + dir_.Sub("1.png"), dir_).exit_code,
            0);
  const std::string raw = dir_.Sub("raw");
  fs::create_directories(raw + "/a");
  fs::create_directories(raw + "/b");
  for (int i = 0; i < 300; ++i) fs::copy_file(dir_.Sub("1.png"), raw + "/a/" + std::to_string(1000 + i) + ".png");
  for (int i = 0; i < 20; ++i) testing::WriteFile(raw + "/a/bad" + std::to_string(i) + ".jpg", "");
  for (int i = 0; i < 1000; ++i) fs::copy_file(dir_.Sub("1.png"), raw + "/b/" + std::to_string(1000 + i) + ".png");
  const std::string build = kPrep + " build " + raw + " " + dir_.Sub("db") + " --size 8 --no-progress";
  auto failed = RunCommand(build, dir_);
  ExpectOneLineError(failed, "split 'train': 20 of 1320 items rejected (stopped after the first ");
  EXPECT_NE(failed.err.find("more than --max-rejects 0.01 allows; first: a/bad0.jpg: empty file"), std::string::npos)
      << failed.err;
  EXPECT_NE(failed.err.find("add --resume and a larger --max-rejects to finish it without the rejected items, or fix "
                            "or remove them and build again"),
            std::string::npos)
      << failed.err;

  testing::WriteFile(raw + "/b/2000.png", testing::ReadFile(dir_.Sub("1.png")));
  ExpectOneLineError(RunCommand(build + " --resume --max-rejects 0.05", dir_),
                     "the interrupted build read other inputs: split 'train' has 1321 items, 1320 when interrupted "
                     "(files added or removed); resume with the same ones");
  fs::remove(raw + "/b/2000.png");
  testing::WriteFile(raw + "/b/1000.png", testing::ReadFile(dir_.Sub("1.png")) + "more");
  ExpectOneLineError(RunCommand(build + " --resume --max-rejects 0.05", dir_),
                     "the interrupted build read other inputs: the files of split 'train' changed (");
  testing::WriteFile(raw + "/b/1000.png", testing::ReadFile(dir_.Sub("1.png")));
  auto finished = RunCommand(build + " --resume --max-rejects 0.05 --json", dir_);
  ASSERT_EQ(finished.exit_code, 0) << finished.err;
  EXPECT_EQ(nlohmann::json::parse(finished.out)["splits"][0]["written"], 1300);
}

// A folder of many files shows a line counting them while it is walked (on
// a terminal, before the split's own line); a small one adds none.
TEST_F(EndToEnd, AWalkOfAManyFileFolderShowsALineOnATerminal) {
  const std::string raw = dir_.Sub("raw");
  for (const char* c : {"a", "b"}) {
    fs::create_directories(raw + "/" + c);
    for (int i = 0; i < 5000; ++i) testing::WriteFile(raw + "/" + c + "/" + std::to_string(i) + ".jpg", "");
  }
  const std::string build = "script -qec '" + kPrep + " build " + raw + " " + dir_.Sub("db") + " --size 8' /dev/null";
  auto many = RunCommand(build, dir_);  // every file empty: rejected
  EXPECT_NE(many.out.find("\033[Klisting " + raw + ": 10000 files  "), std::string::npos) << many.out;
  EXPECT_NE(many.out.find(" files/s\r\n"), std::string::npos) << many.out;
  EXPECT_NE(many.out.find("every item read was rejected (the first "), std::string::npos) << many.out;
  EXPECT_NE(many.out.find(" of 10000; the build stopped there)"), std::string::npos) << many.out;
  EXPECT_EQ(many.out.find("--resume"), std::string::npos) << many.out;  // nothing kept to resume
  fs::remove_all(raw + "/b");
  for (int i = 100; i < 5000; ++i) fs::remove(raw + "/a/" + std::to_string(i) + ".jpg");
  auto few = RunCommand(build, dir_);
  EXPECT_EQ(few.out.find("listing "), std::string::npos) << few.out;
  EXPECT_NE(few.out.find("every item read was rejected (100 of 100)"), std::string::npos) << few.out;
}

// A table large enough to take a while is decompressed and read with a
// progress line on a terminal (then the split's own line); none elsewhere.
TEST_F(EndToEnd, ALargeTableIsDecompressedAndReadWithProgressOnATerminal) {
  std::string table = "a,b,label\n";
  for (int i = 0; table.size() < (36u << 20); ++i) {
    table += std::to_string(i) + "," + std::to_string(i * 7 % 1000) + "," + std::to_string(i % 3) + "\n";
  }
  testing::WriteFile(dir_.Sub("t.csv"), table);
  // Stored gzip blocks (level 0): the compressed file is as large as the table.
  const std::string in_dir = "cd " + dir_.path() + " && ";
  auto gz = RunCommand(in_dir + "/usr/bin/python3 -c \"import gzip, shutil; shutil.copyfileobj(open('t.csv', 'rb'), "
                       "gzip.open('t.csv.gz', 'wb', compresslevel=0))\"", dir_);
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  const std::string build = in_dir + kPrep + " build t.csv.gz db --limit 10";
  auto tty = RunCommand("script -qec '" + build + "' /dev/null", dir_);  // a terminal
  ASSERT_EQ(tty.exit_code, 0) << tty.out;
  for (const char* line : {"\033[Kdecompressing t.csv.gz [", "\033[Kreading t.csv.gz [", "\033[Ktrain ["}) {
    EXPECT_NE(tty.out.find(line), std::string::npos) << line << "\n" << tty.out;
  }
  EXPECT_NE(tty.out.find(" MB (100.0%)"), std::string::npos) << tty.out;
  auto piped = RunCommand(build + " --force", dir_);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find("reading t.csv.gz"), std::string::npos) << piped.err;
  testing::WriteFile(dir_.Sub("small.csv"), table.substr(0, table.find('\n', 1 << 20) + 1));
  auto small = RunCommand("script -qec '" + in_dir + kPrep + " build small.csv small.db' /dev/null", dir_);
  ASSERT_EQ(small.exit_code, 0) << small.out;
  EXPECT_EQ(small.out.find("reading small.csv"), std::string::npos) << small.out;
}

// A db built by one user (root in a container image's build, a colleague on
// a shared machine) is read by others who may not write beside it. The
// README's command run again by such a user refused (`DB db: cannot create
// files in ...`) where it writes nothing: the db is up to date. Only --force
// and --update write, and are refused naming why; train, the loader and prep
// verify read it.
TEST_F(EndToEnd, AnotherUsersDbIsFoundUpToDateAndReadWithoutWritingBesideIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run commands as another user";
  const std::string nobody = "runuser -u nobody -- ";
  if (RunCommand(nobody + kPrep + " --help", dir_).exit_code != 0) GTEST_SKIP() << "user nobody cannot run " << kPrep;
  fs::permissions(dir_.path(), fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  const std::string db = dir_.Sub("db"), options = " --limit 300 --no-progress";
  ASSERT_EQ(PrepFashion(db, options, dir_).exit_code, 0);
  auto again = RunCommand(nobody + kPrep + " build " + kFashion + " " + db + options, dir_);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err, "prep: " + db + " is up to date (4 input files unchanged)\n");
  ExpectOneLineError(RunCommand(nobody + kPrep + " build " + kFashion + " " + db + options + " --force", dir_),
                     "DB " + db + ": cannot create files in " + dir_.path() + " (Permission denied)");
  for (const std::string& reads : {kTrain + " --db " + db + " --epochs 1", kLoader + " bench " + db,
                                   kPrep + " verify " + db}) {
    auto read = RunCommand(nobody + reads, dir_);
    EXPECT_EQ(read.exit_code, 0) << reads << "\n" << read.err;
  }
}

}  // namespace
}  // namespace granary
