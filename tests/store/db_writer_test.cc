// DbWriter's ownership rules: what it may replace or delete, and its lock
// against a second build of the same path.
#include "store/db_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/db.h"
#include "store/format.h"
#include "tests/test_util.h"

namespace granary {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

DbWriterOptions Options(const std::string& path) {
  DbWriterOptions o;
  o.path = path;
  o.schema.fields = {{"label", DType::kInt64, {}}};
  return o;
}

// Builds a db of `n` labels at o.path; the writer's status if it fails.
Status Build(const DbWriterOptions& o, int n) {
  auto writer = DbWriter::Create(o);
  if (!writer.ok()) return writer.status();
  RecordEncoder enc(o.schema, 3);
  GRANARY_RETURN_IF_ERROR(writer.value()->BeginSplit("train", n));
  for (int64_t i = 0; i < n; ++i) {
    std::string value;
    uint64_t hash = 0;
    GRANARY_RETURN_IF_ERROR(enc.EncodeOne({{&i, sizeof(i), {}}}, &value, &hash));
    GRANARY_RETURN_IF_ERROR(writer.value()->Append(value, {hash}));
  }
  GRANARY_RETURN_IF_ERROR(writer.value()->EndSplit());
  return writer.value()->Finish(Manifest{});
}

uint64_t TrainCount(const std::string& path) {
  auto db = DbReader::Open(path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? db.value()->manifest().splits.at(0).count : 0;
}

TEST(DbWriterOwnership, OverwriteReplacesAnExistingDbAndLeavesNothingBehind) {
  TempDir dir;
  DbWriterOptions o = Options(dir.Sub("db"));
  ASSERT_TRUE(Build(o, 5).ok());
  o.overwrite = true;
  ASSERT_TRUE(Build(o, 7).ok());
  EXPECT_EQ(TrainCount(o.path), 7u);
  EXPECT_FALSE(fs::exists(o.path + format::kPartialSuffix));
  EXPECT_FALSE(fs::exists(o.path + "/builder.pid"));
}

TEST(DbWriterOwnership, OverwriteNeverReplacesWhatIsNotADb) {
  TempDir dir;
  fs::create_directories(dir.Sub("notes"));
  testing::WriteFile(dir.Sub("notes/todo.txt"), "keep me");
  testing::WriteFile(dir.Sub("file.txt"), "keep me too");
  // A folder with a manifest of some other tool is not a granary db either.
  fs::create_directories(dir.Sub("other"));
  testing::WriteFile(dir.Sub("other/manifest.json"), R"({"format": "something-else"})");
  for (const char* name : {"notes", "file.txt", "other"}) {
    DbWriterOptions o = Options(dir.Sub(name));
    o.overwrite = true;
    Status s = Build(o, 3);
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << name;
    EXPECT_NE(s.message().find(std::string(name) + ": exists and is not a granary db"), std::string::npos)
        << s.message();
    EXPECT_FALSE(fs::exists(o.path + format::kPartialSuffix)) << name;
  }
  EXPECT_EQ(testing::ReadFile(dir.Sub("notes/todo.txt")), "keep me");
  EXPECT_EQ(testing::ReadFile(dir.Sub("file.txt")), "keep me too");
  EXPECT_TRUE(fs::exists(dir.Sub("other/manifest.json")));
}

TEST(DbWriterOwnership, TheInputAndFoldersHoldingItAreNeverTheOutput) {
  TempDir dir;
  fs::create_directories(dir.Sub("parent/raw"));
  testing::WriteFile(dir.Sub("parent/raw/a.jpg"), "image");
  for (const std::string& out : {dir.Sub("parent/raw"), dir.Sub("parent"), dir.Sub("parent/raw/"),
                                 dir.Sub("parent/../parent")}) {
    DbWriterOptions o = Options(out);
    o.overwrite = true;
    o.inputs = {dir.Sub("parent/raw")};
    Status s = Build(o, 3);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << out;
    EXPECT_NE(s.message().find("is or contains the input"), std::string::npos) << s.message();
  }
  // The input named through a symlink is still the input.
  fs::create_symlink(dir.Sub("parent"), dir.Sub("link"));
  DbWriterOptions o = Options(dir.Sub("link"));
  o.overwrite = true;
  o.inputs = {dir.Sub("parent/raw")};
  EXPECT_EQ(Build(o, 3).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(testing::ReadFile(dir.Sub("parent/raw/a.jpg")), "image");
  // A db beside the input is fine.
  o = Options(dir.Sub("parent/db"));
  o.inputs = {dir.Sub("parent/raw")};
  EXPECT_TRUE(Build(o, 3).ok());
}

TEST(DbWriterOwnership, APartialFolderNotMadeByABuildIsKept) {
  TempDir dir;
  fs::create_directories(dir.Sub("db.partial"));
  testing::WriteFile(dir.Sub("db.partial/mine.txt"), "keep me");
  Status s = Build(Options(dir.Sub("db")), 3);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("db.partial: exists and was not made by a build"), std::string::npos) << s.message();
  EXPECT_EQ(testing::ReadFile(dir.Sub("db.partial/mine.txt")), "keep me");
}

TEST(DbWriterOwnership, AStalePartialFolderOfAKilledBuildIsReplaced) {
  TempDir dir;
  fs::create_directories(dir.Sub("db.partial/train"));
  testing::WriteFile(dir.Sub("db.partial/builder.pid"), "999999\n");
  testing::WriteFile(dir.Sub("db.partial/train/shard-00000.mdb"), "half-written");
  ASSERT_TRUE(Build(Options(dir.Sub("db")), 4).ok());
  EXPECT_EQ(TrainCount(dir.Sub("db")), 4u);
  EXPECT_FALSE(fs::exists(dir.Sub("db.partial")));
}

// flock locks belong to an open file description, so a second writer in the
// same process contends exactly as a second `prep build` would.
// A --resume refused because the inputs or options changed names what
// changed and keeps the interrupted build's work for a resume that fits.
TEST(DbWriterResume, ARefusedResumeNamesWhatChangedAndKeepsThePartialBuild) {
  TempDir dir;
  const DbWriterOptions o = Options(dir.Sub("db"));
  {
    auto writer = DbWriter::Create(o);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer.value()->StartJournal(R"({"options":{"size":"64"}})", [] { return ""; }).ok());
  }  // interrupted: the journal stays
  ASSERT_TRUE(HasResumableBuild(o.path));
  {
    ResumePoint resume;
    auto writer = DbWriter::Create(o, &resume);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE(resume.resuming);
    Status refused = writer.value()->StartJournal(R"({"options":{"size":"32"}})", [] { return ""; });
    EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
    EXPECT_NE(refused.message().find("other inputs or options (options.size: \"64\" -> \"32\")"), std::string::npos)
        << refused.message();
  }
  EXPECT_TRUE(HasResumableBuild(o.path)) << "the refused resume deleted the interrupted build";
}

TEST(DbWriterLock, ASecondBuildOfTheSamePathIsBusyAndTheFirstPublishesAGoodDb) {
  TempDir dir;
  DbWriterOptions o = Options(dir.Sub("db"));
  auto first = DbWriter::Create(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  RecordEncoder enc(o.schema, 3);
  ASSERT_TRUE(first.value()->BeginSplit("train", 2).ok());

  for (bool overwrite : {false, true}) {
    o.overwrite = overwrite;
    auto second = DbWriter::Create(o);
    EXPECT_EQ(second.status().code(), Status::Code::kBusy);
    EXPECT_NE(second.status().message().find("being built by process " + std::to_string(::getpid())),
              std::string::npos)
        << second.status().message();
    ResumePoint resume;
    EXPECT_EQ(DbWriter::Create(o, &resume).status().code(), Status::Code::kBusy);
  }

  for (int64_t i = 0; i < 2; ++i) {
    std::string value;
    uint64_t hash = 0;
    ASSERT_TRUE(enc.EncodeOne({{&i, sizeof(i), {}}}, &value, &hash).ok());
    ASSERT_TRUE(first.value()->Append(value, {hash}).ok());
  }
  ASSERT_TRUE(first.value()->EndSplit().ok());
  ASSERT_TRUE(first.value()->Finish(Manifest{}).ok());
  first.value().reset();
  EXPECT_EQ(TrainCount(o.path), 2u);
  // Once the first is done, the path can be built again.
  o.overwrite = true;
  EXPECT_TRUE(Build(o, 3).ok());
  EXPECT_EQ(TrainCount(o.path), 3u);
}

}  // namespace
}  // namespace granary
