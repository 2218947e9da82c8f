// End to end: where prep and train write. No output replaces a db's files, an
// input, another output or a file of another kind; an unwritable output is
// found before any work; a checkpoint directory belongs to one run; a lost
// write is an error.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// Every file under `dir` (relative path) with its bytes.
std::map<std::string, std::string> Contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = testing::ReadFile(e.path().string());
  }
  return files;
}

class Outputs : public SmallDbRun {};

TEST_F(Outputs, NoOutputFlagWritesIntoTheDb) {
  const auto before = Contents(db_);
  const std::string manifest = db_ + "/manifest.json";
  ExpectOneLineError(RunCommand(train_ + "--metrics " + manifest, dir_),
                     "--metrics " + manifest + ": is inside the db");
  ExpectOneLineError(RunCommand(train_ + "--report " + manifest, dir_), "--report " + manifest + ": is inside the db");
  ExpectOneLineError(RunCommand(train_ + "--save " + db_ + "/m.pt", dir_), "--save " + db_ + "/m.pt: is inside the db");
  ExpectOneLineError(RunCommand(train_ + "--checkpoint-dir " + db_ + "/train", dir_), "is inside the db");
  ExpectOneLineError(RunCommand(train_ + "--checkpoint-dir " + db_, dir_), "is the db");
  ExpectOneLineError(RunCommand(kPrep + " cat " + db_ + " --index 0 --png " + manifest, dir_),
                     "--png " + manifest + ": is inside the db");
  ExpectOneLineError(PrepFashion(db_ + "/inner.db", "--limit 10", dir_),
                     "is inside the db");
  EXPECT_EQ(Contents(db_), before);
  // Stdout redirected into the db: the shell made the file, granary writes nothing to it.
  ExpectOneLineError(RunCommand("(" + train_ + "--json > " + db_ + "/out.json)", dir_),
                     "stdout " + fs::canonical(db_).string() + "/out.json: is inside the db");
  EXPECT_EQ(testing::ReadFile(db_ + "/out.json"), "");
  fs::remove(db_ + "/out.json");
  EXPECT_EQ(RunCommand(kPrep + " verify " + db_, dir_).exit_code, 0);
}

TEST_F(Outputs, NoOutputReplacesAnInputAnotherOutputOrAFileOfAnotherKind) {
  testing::WriteFile(dir_.Sub("table.csv"), "a,b\n1,2\n");
  ExpectOneLineError(RunCommand(train_ + "--save " + dir_.Sub("table.pt") + " --metrics " + dir_.Sub("table.pt"), dir_),
                     "--metrics " + dir_.Sub("table.pt") + ": is also --save");
  ExpectOneLineError(RunCommand(train_ + "--report " + dir_.Sub("table.csv"), dir_),
                     "holds something other than an HTML page; refusing to replace it");
  EXPECT_EQ(testing::ReadFile(dir_.Sub("table.csv")), "a,b\n1,2\n");
  ExpectOneLineError(RunCommand(train_ + "--report /dev/null", dir_),
                     "--report /dev/null: is a character device; granary writes --report only as a regular file");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A model over the model it was given as input, or a report through a link to a device.
  ASSERT_EQ(RunCommand(train_ + "--epochs 1 --save " + dir_.Sub("m.pt"), dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(train_ + "--model " + dir_.Sub("m.pt") + " --save " + dir_.Sub("m.pt"), dir_),
                     "is the input --model");
  fs::create_symlink("/proc/self/fd/1", dir_.Sub("to-stdout.html"));
  ExpectOneLineError(RunCommand("(" + train_ + "--report " + dir_.Sub("to-stdout.html") + " > /dev/null)", dir_),
                     "is a character device; granary writes --report only as a regular file");
  EXPECT_TRUE(fs::is_symlink(dir_.Sub("to-stdout.html")));
  // Through a symlink to a page: the page is replaced, the link kept.
  testing::WriteFile(dir_.Sub("page.html"), "<!DOCTYPE html><p>old</p>");
  fs::create_symlink("page.html", dir_.Sub("link.html"));
  ASSERT_EQ(RunCommand(train_ + "--epochs 1 --report " + dir_.Sub("link.html"), dir_).exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(dir_.Sub("link.html")));
  EXPECT_EQ(testing::ReadFile(dir_.Sub("page.html")).find("<p>old</p>"), std::string::npos);
}

// The whole run is not lost to an output found unwritable at its end.
TEST_F(Outputs, AnUnwritableOutputIsFoundBeforeTraining) {
  testing::WriteFile(dir_.Sub("a-file"), "x");
  for (const auto& [flags, needle] : std::map<std::string, std::string>{
           {"--save /proc/self/m.pt", "--save /proc/self/m.pt: cannot create files in /proc/"},
           {"--report " + dir_.Sub("no/such/r.html"), "no directory"},
           {"--checkpoint-dir " + dir_.Sub("a-file"), "is a regular file, not a directory"},
           {"--checkpoint-dir " + dir_.Sub("a-file/ck"), "cannot be reached (Not a directory)"}}) {
    auto r = RunCommand(train_ + flags, dir_);
    ExpectOneLineError(r, needle);
    EXPECT_EQ(r.out, "") << flags;  // refused before the first line of training
  }
}

TEST_F(Outputs, ALostWriteIsAnError) {
  ExpectOneLineError(RunCommand(train_ + "--epochs 1 --metrics /dev/full", dir_), "/dev/full: --metrics: write failed");
  ExpectOneLineError(RunCommand("(" + train_ + "--epochs 1 --json > /dev/full)", dir_), "stdout: write failed");
  ExpectOneLineError(RunCommand("(" + kPrep + " info " + db_ + " --json > /dev/full)", dir_), "stdout: write failed");
  ExpectOneLineError(RunCommand("(" + kPrep + " verify " + db_ + " > /dev/full)", dir_), "stdout: write failed");
  // The text report's lines failed as they were written: the end names
  // their reason, not another call's (it said "Operation not permitted").
  const auto text = RunCommand("(" + train_ + "--epochs 1 > /dev/full)", dir_);
  ExpectOneLineError(text, "stdout: write failed: No space left on device");
}

// Nothing is written through a link where a temporary file would go, nor
// through a link at a file granary owns (the checkpoint directory's run
// record): the files the links name are untouched, and the refusal comes
// before training.
TEST_F(Outputs, NoTemporaryOrOwnFileIsWrittenThroughALink) {
  testing::WriteFile(dir_.Sub("outside"), "the user's");
  fs::create_directories(dir_.Sub("t"));
  fs::create_symlink(dir_.Sub("outside"), dir_.Sub("t/m.pt.tmp"));
  fs::create_directories(dir_.Sub("ck/step-0000000004.ckpt.tmp"));  // a directory where a temporary went
  auto saved = RunCommand(train_ + "--epochs 1 --save " + dir_.Sub("t/m.pt") + " --checkpoint-dir " + dir_.Sub("ck"),
                          dir_);
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_FALSE(fs::is_symlink(dir_.Sub("t/m.pt")));
  EXPECT_GT(fs::file_size(dir_.Sub("t/m.pt")), 1000u);
  EXPECT_TRUE(fs::exists(dir_.Sub("ck/step-0000000004.ckpt")));
  EXPECT_TRUE(fs::is_directory(dir_.Sub("ck/step-0000000004.ckpt.tmp")));  // not granary's to remove
  EXPECT_EQ(testing::ReadFile(dir_.Sub("outside")), "the user's");

  const std::string ck = dir_.Sub("ck2");
  fs::create_directories(ck);
  fs::create_symlink(dir_.Sub("outside"), ck + "/granary-run.json");
  auto r = RunCommand(train_ + "--epochs 1 --checkpoint-dir " + ck, dir_);
  ExpectOneLineError(r, ck + "/granary-run.json: is a symlink");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(testing::ReadFile(dir_.Sub("outside")), "the user's");
  EXPECT_TRUE(fs::is_symlink(ck + "/granary-run.json"));
}

// Run A's checkpoints are never deleted, replaced or resumed by run B: B is
// refused naming A, before it trains; A's --resume continues there.
TEST_F(Outputs, ACheckpointDirectoryBelongsToOneRun) {
  const std::string kd = dir_.Sub("kd");
  const std::string a = train_ + "--checkpoint-dir " + kd + " --keep 2 --optimizer sgd --lr 0.1 ";
  ASSERT_EQ(RunCommand(a + "--epochs 2", dir_).exit_code, 0);
  const auto written = Contents(kd);
  const std::string run = nlohmann::json::parse(testing::ReadFile(kd + "/granary-run.json"))["run"];
  ASSERT_EQ(run.size(), 16u);

  auto b = RunCommand(train_ + "--checkpoint-dir " + kd + " --keep 2 --optimizer sgd --lr 0.2 --epochs 2", dir_);
  ExpectOneLineError(b, "--checkpoint-dir " + kd + ": holds the checkpoints of run " + run + " (started ");
  EXPECT_EQ(b.out, "");
  EXPECT_EQ(Contents(kd), written);
  auto resumed = RunCommand(a + "--epochs 3 --resume latest", dir_);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(fs::exists(kd + "/step-0000000012.ckpt"));

  // Two at once: the second is refused while the first holds the directory.
  const std::string kd2 = dir_.Sub("kd2");
  auto both = RunCommand("(" + train_ + "--epochs 200 --checkpoint-dir " + kd2 + " >/dev/null 2>&1 & pid=$!; " +
                             "for i in $(seq 1000); do test -f " + kd2 +
                             "/granary-run.json && break; sleep 0.01; done; " +
                             train_ + "--checkpoint-dir " + kd2 + "; kill $pid; wait $pid)",
                         dir_);
  EXPECT_NE(both.err.find("--checkpoint-dir " + kd2 + ": in use by run "), std::string::npos) << both.err;
}

}  // namespace
}  // namespace granary
