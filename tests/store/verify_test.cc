#include "store/verify.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "store/db.h"
#include "store/db_writer.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

Schema TinySchema() {
  Schema s;
  s.fields = {{"image", DType::kUInt8, {1, 3, 3}}, {"label", DType::kInt64, {}}};
  return s;
}

std::string RecordValue(RecordEncoder& enc, uint64_t i, uint64_t* hash) {
  std::string image(9, static_cast<char>(i * 17 + 1));
  int64_t label = static_cast<int64_t>(i % 3);
  std::string value;
  EXPECT_TRUE(enc.EncodeOne({{image.data(), image.size(), {}}, {&label, 8, {}}}, &value, hash).ok());
  return value;
}

// A db with one split of n records over `shards` shards; returns the values.
std::vector<std::string> WriteOneSplitDb(const std::string& path, uint64_t n, int shards) {
  DbWriterOptions o;
  o.path = path;
  o.schema = TinySchema();
  o.shards_per_split = shards;
  auto writer = DbWriter::Create(o);
  EXPECT_TRUE(writer.ok());
  RecordEncoder enc(o.schema, 3);
  std::vector<std::string> values;
  EXPECT_TRUE(writer.value()->BeginSplit("train", n).ok());
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t hash;
    values.push_back(RecordValue(enc, i, &hash));
    EXPECT_TRUE(writer.value()->Append(values.back(), {hash}).ok());
  }
  EXPECT_TRUE(writer.value()->EndSplit().ok());
  EXPECT_TRUE(writer.value()->Finish(Manifest()).ok());
  return values;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(Verify, AGoodDbVerifies) {
  TempDir dir;
  WriteOneSplitDb(dir.Sub("db"), 50, 3);
  auto report = VerifyDb(dir.Sub("db"));
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << Joined(report->problems);
  EXPECT_EQ(report->samples_ok, 50u);
  auto db = DbReader::Open(dir.Sub("db"));
  EXPECT_EQ(report->content_hash, db.value()->manifest().content_hash);
}

// Flip every byte of record 4's stored value, one at a time: verify names
// that record and only it, every time.
TEST(Verify, CatchesEveryFlippedByteInsideARecordValue) {
  TempDir dir;
  const std::string db_path = dir.Sub("db");
  const std::vector<std::string> values = WriteOneSplitDb(db_path, 8, 1);
  const std::string shard_path = db_path + "/train/shard-00000.mdb";
  const std::string original = testing::ReadFile(shard_path);
  const size_t at = original.find(values[4]);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(original.find(values[4], at + 1), std::string::npos);  // one transaction: one copy
  for (size_t pos = 0; pos < values[4].size(); ++pos) {
    std::string damaged = original;
    damaged[at + pos] = static_cast<char>(damaged[at + pos] ^ 0x20);
    testing::WriteFile(shard_path, damaged);
    auto report = VerifyDb(db_path);
    ASSERT_TRUE(report.ok());
    ASSERT_FALSE(report->ok()) << "byte " << pos << " went unnoticed";
    EXPECT_EQ(report->samples_ok, 7u) << "byte " << pos;
    EXPECT_NE(Joined(report->problems).find("train/shard-00000.mdb, key 4:"), std::string::npos)
        << "byte " << pos << ":\n" << Joined(report->problems);
  }
  testing::WriteFile(shard_path, original);
  EXPECT_TRUE(VerifyDb(db_path).value().ok());
}

// Garbage over LMDB's own pages: verify reports the shard instead of crashing.
TEST(Verify, ReportsDamagedLmdbPagesWithoutCrashing) {
  TempDir dir;
  const std::string db_path = dir.Sub("db");
  WriteOneSplitDb(db_path, 2000, 2);
  const std::string shard_path = db_path + "/train/shard-00001.mdb";
  std::string bytes = testing::ReadFile(shard_path);
  ASSERT_GT(bytes.size(), 8u * 4096);
  uint32_t x = 7;
  for (size_t page = 2; page * 4096 < bytes.size(); page += 3) {
    for (size_t k = 0; k < 64; ++k) {
      x = x * 1664525 + 1013904223;
      bytes[page * 4096 + k] = static_cast<char>(x >> 24);
    }
  }
  testing::WriteFile(shard_path, bytes);
  auto report = VerifyDb(db_path);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->ok());
  EXPECT_NE(Joined(report->problems).find("train/shard-00001.mdb"), std::string::npos) << Joined(report->problems);
  EXPECT_LT(report->samples_ok, 2000u);
  EXPECT_GE(report->samples_ok, 1000u);  // shard 0 is intact
}

// Point the main tree's root past the end of the file in both LMDB meta pages
// (offsets of MDB_meta in lmdb 0.9 on 64-bit: md_root of the main db at 128,
// mm_last_pg at 136). Walking it faults; verify survives and says so.
TEST(Verify, ACrashWhileWalkingIsReportedAsStructuralCorruption) {
  TempDir dir;
  const std::string db_path = dir.Sub("db");
  WriteOneSplitDb(db_path, 100, 1);
  const std::string shard_path = db_path + "/train/shard-00000.mdb";
  std::string bytes = testing::ReadFile(shard_path);
  for (size_t meta : {size_t{0}, size_t{4096}}) {
    const uint64_t root = 100000, last = 100001;
    std::memcpy(&bytes[meta + 128], &root, 8);
    std::memcpy(&bytes[meta + 136], &last, 8);
  }
  testing::WriteFile(shard_path, bytes);
  auto report = VerifyDb(db_path);
  ASSERT_TRUE(report.ok());
  EXPECT_NE(Joined(report->problems).find("train/shard-00000.mdb: structural corruption"), std::string::npos)
      << Joined(report->problems);
  EXPECT_EQ(report->samples_ok, 0u);
}

TEST(Verify, MissingShardFileIsAProblemNotACrash) {
  TempDir dir;
  WriteOneSplitDb(dir.Sub("db"), 10, 2);
  std::filesystem::remove(dir.Sub("db/train/shard-00000.mdb"));
  auto report = VerifyDb(dir.Sub("db"));
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_NE(report->problems[0].find("shard-00000.mdb"), std::string::npos);
}

}  // namespace
}  // namespace granary
