#include "store/db.h"
#include "store/db_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
#include <thread>

#include "store/format.h"
#include "tests/test_util.h"

namespace granary {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

Schema SmallSchema() {
  Schema s;
  s.fields = {{"image", DType::kUInt8, {1, 4, 4}}, {"label", DType::kInt64, {}}};
  return s;
}

struct Encoded {
  std::string value;
  uint64_t hash = 0;
};

// Sample i of split `salt`: image bytes (i + salt + k) % 251, label i % 10.
Encoded EncodeSample(RecordEncoder& enc, uint64_t i, int salt) {
  std::string image(16, '\0');
  for (int k = 0; k < 16; ++k) image[k] = static_cast<char>((i + salt + k) % 251);
  int64_t label = static_cast<int64_t>(i % 10);
  Encoded e;
  EXPECT_TRUE(enc.EncodeOne({{image.data(), image.size(), {}}, {&label, sizeof(label), {}}}, &e.value, &e.hash).ok());
  return e;
}

// Writes splits "train" (n) and "test" (n / 4) with `shards` shards each.
void WriteDb(const std::string& path, uint64_t n, int shards, int zstd_level = 3) {
  DbWriterOptions o;
  o.path = path;
  o.schema = SmallSchema();
  o.shards_per_split = shards;
  o.records_per_commit = 7;  // exercise several transactions
  auto writer = DbWriter::Create(o);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  RecordEncoder enc(o.schema, zstd_level);
  for (auto [name, count, salt] : {std::tuple<const char*, uint64_t, int>{"train", n, 0}, {"test", n / 4, 100}}) {
    ASSERT_TRUE(writer.value()->BeginSplit(name, count).ok());
    for (uint64_t i = 0; i < count; ++i) {
      Encoded e = EncodeSample(enc, i, salt);
      ASSERT_TRUE(writer.value()->Append(e.value, {e.hash}).ok());
    }
    ASSERT_TRUE(writer.value()->EndSplit().ok());
  }
  Manifest m;
  m.label_field = "label";
  m.num_classes = 10;
  m.codec = "zstd";
  m.zstd_level = 3;
  ASSERT_TRUE(writer.value()->Finish(m).ok());
}

class DbRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(DbRoundTrip, EveryRecordReadsBackFromItsShard) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  WriteDb(path, 101, GetParam());
  EXPECT_FALSE(fs::exists(path + format::kPartialSuffix));

  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  const Manifest& m = db.value()->manifest();
  ASSERT_EQ(m.splits.size(), 2u);
  EXPECT_EQ(m.splits[0].count, 101u);
  EXPECT_EQ(m.splits[0].shards.size(), static_cast<size_t>(GetParam()));
  EXPECT_EQ(m.splits[1].count, 25u);
  EXPECT_EQ(m.content_hash.substr(0, 6), "xxh64:");

  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(reader.ok());
  const FieldView* rec = nullptr;
  for (uint64_t i = 0; i < 101; ++i) {
    ASSERT_TRUE(reader.value()->Read(i, &rec).ok()) << i;
    EXPECT_EQ(rec[0].data[5], static_cast<uint8_t>((i + 5) % 251));
    int64_t label;
    std::memcpy(&label, rec[1].data, 8);
    EXPECT_EQ(label, static_cast<int64_t>(i % 10));
  }
  EXPECT_EQ(reader.value()->Read(101, &rec).code(), Status::Code::kNotFound);
  EXPECT_EQ(SplitReader::Create(*db.value(), "val").status().code(), Status::Code::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Shards, DbRoundTrip, ::testing::Values(1, 3));

TEST(Db, ContentHashDependsOnlyOnContent) {
  TempDir dir;
  WriteDb(dir.Sub("a"), 50, 1);
  WriteDb(dir.Sub("b"), 50, 2, /*zstd_level=*/0);
  WriteDb(dir.Sub("c"), 51, 1);
  auto a = DbReader::Open(dir.Sub("a")), b = DbReader::Open(dir.Sub("b")), c = DbReader::Open(dir.Sub("c"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a.value()->manifest().content_hash, b.value()->manifest().content_hash);
  EXPECT_NE(a.value()->manifest().content_hash, c.value()->manifest().content_hash);
}

TEST(Db, UnfinishedWriterLeavesNoDb) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    DbWriterOptions o;
    o.path = path;
    o.schema = SmallSchema();
    auto writer = DbWriter::Create(o);
    ASSERT_TRUE(writer.ok());
    RecordEncoder enc(o.schema, 3);
    ASSERT_TRUE(writer.value()->BeginSplit("train", 1).ok());
    Encoded e = EncodeSample(enc, 0, 0);
    ASSERT_TRUE(writer.value()->Append(e.value, {e.hash}).ok());
    EXPECT_TRUE(fs::exists(path + format::kPartialSuffix));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + format::kPartialSuffix));
  auto db = DbReader::Open(path);
  EXPECT_EQ(db.status().code(), Status::Code::kNotFound);
}

// A shard's map starts small and grows as records arrive (so a build runs
// under an address-space limit); with max_shard_bytes it stops there, failing
// the build with a message naming the shard and the flag.
TEST(Db, AShardsMapGrowsFromASmallStartAndStopsAtItsLimit) {
  Schema schema;
  schema.fields = {{"image", DType::kUInt8, {4000}}};
  RecordEncoder enc(schema, /*zstd_level=*/0);
  std::vector<std::string> images(3000, std::string(4000, '\0'));  // incompressible: one LMDB page each
  std::vector<Encoded> records(images.size());
  uint64_t state = 42;
  for (size_t i = 0; i < images.size(); ++i) {
    for (char& c : images[i]) {
      c = static_cast<char>((state = state * 6364136223846793005u + 1442695040888963407u) >> 56);
    }
    ASSERT_TRUE(enc.EncodeOne({{images[i].data(), images[i].size(), {}}}, &records[i].value, &records[i].hash).ok());
  }
  TempDir dir;
  for (uint64_t limit : {uint64_t{0}, uint64_t{4} << 20}) {
    const std::string path = dir.Sub("db" + std::to_string(limit));
    DbWriterOptions o;
    o.path = path;
    o.schema = schema;
    o.initial_map_bytes = uint64_t{1} << 20;
    o.max_shard_bytes = limit;
    auto writer = DbWriter::Create(o);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE(writer.value()->BeginSplit("train", records.size()).ok());
    Status appended;
    size_t written = 0;
    for (; written < records.size() && appended.ok(); ++written) {
      appended = writer.value()->Append(records[written].value, {records[written].hash});
    }
    if (limit > 0) {
      EXPECT_EQ(appended.code(), Status::Code::kFailedPrecondition) << appended.ToString();
      EXPECT_NE(appended.message().find("shard-00000.mdb: the shard would outgrow --max-shard-mb 4"), std::string::npos)
          << appended.message();
      EXPECT_LT(written, records.size());
      EXPECT_GT(written, 500u);  // it got near the limit first
      EXPECT_LE(fs::file_size(path + format::kPartialSuffix + "/train/shard-00000.mdb"), limit);
      continue;
    }
    ASSERT_TRUE(appended.ok()) << appended.ToString();
    ASSERT_TRUE(writer.value()->EndSplit().ok());
    ASSERT_TRUE(writer.value()->Finish(Manifest()).ok());
    EXPECT_GT(fs::file_size(path + "/train/shard-00000.mdb"), uint64_t{11} << 20);  // 11 times the first map
    auto db = DbReader::Open(path);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto reader = SplitReader::Create(*db.value(), "train");
    ASSERT_TRUE(reader.ok());
    const FieldView* rec = nullptr;
    for (uint64_t i : {uint64_t{0}, uint64_t{1777}, uint64_t{2999}}) {
      ASSERT_TRUE(reader.value()->Read(i, &rec).ok());
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec[0].data), images[i].size()), images[i]) << i;
    }
  }
}

TEST(Db, ExistingDbIsNotReplacedWithoutOverwrite) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 10, 1);
  DbWriterOptions o;
  o.path = dir.Sub("db");
  o.schema = SmallSchema();
  auto writer = DbWriter::Create(o);
  EXPECT_EQ(writer.status().code(), Status::Code::kFailedPrecondition);
  // The hint to pass --force is prep's (EndToEnd.ForceNeverDeletesTheInputOrWhatIsNotADb).
  EXPECT_NE(writer.status().message().find(dir.Sub("db") + ": already exists"), std::string::npos);
}

TEST(Db, NonDbDirectoriesAreRejectedClearly) {
  TempDir dir;
  auto missing = DbReader::Open(dir.Sub("nope"));
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  auto empty = DbReader::Open(dir.path());
  EXPECT_EQ(empty.status().code(), Status::Code::kNotFound);
  EXPECT_NE(empty.status().message().find("is not a granary db"), std::string::npos) << empty.status().message();
  EXPECT_EQ(empty.status().message().find("raw data"), std::string::npos);
  // Raw data given where a db goes (`train --db photos/`, prep not run yet): prep build is named.
  std::filesystem::create_directories(dir.Sub("photos/cat"));
  testing::WriteFile(dir.Sub("photos/cat/1.JPG"), "");
  testing::WriteFile(dir.Sub("t.csv"), "a,label\n1,0\n");
  for (const std::string& raw : {dir.Sub("photos"), dir.Sub("t.csv")}) {
    EXPECT_NE(DbReader::Open(raw).status().message().find("; it looks like raw data: `prep build " + raw +
                                                          " DB` makes a db of it"),
              std::string::npos)
        << DbReader::Open(raw).status().ToString();
  }
}

// `train --db db/train`, a split folder of the db (or its shard file)
// named where the db goes: the db is named.
TEST(Db, AFolderOrFileInsideADbNamesTheDb) {
  TempDir dir;
  const std::string db = dir.Sub("db");
  WriteDb(db, 10, 1);
  std::string shard;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(db)) {
    if (entry.path().extension() == ".mdb") shard = entry.path().string();
  }
  ASSERT_FALSE(shard.empty());
  const std::string split = std::filesystem::path(shard).parent_path().string();
  for (const std::string& inside : {split, split + "/", shard}) {
    const Status opened = DbReader::Open(inside).status();
    EXPECT_NE(opened.message().find(inside + ": is not a granary db"), std::string::npos) << opened.ToString();
    EXPECT_NE(opened.message().find("; it lies inside the db " + db + ": name the db itself"), std::string::npos)
        << opened.ToString();
  }
}

TEST(Db, MalformedOrNewerManifestIsRejected) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  WriteDb(path, 10, 1);
  const std::string manifest_path = path + "/" + format::kManifestFile;
  const std::string good = testing::ReadFile(manifest_path);

  testing::WriteFile(manifest_path, good.substr(0, good.size() / 2));
  auto truncated = DbReader::Open(path);
  EXPECT_EQ(truncated.status().code(), Status::Code::kCorruption);
  EXPECT_NE(truncated.status().message().find("manifest.json"), std::string::npos);

  std::string newer = good;
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 99");
  testing::WriteFile(manifest_path, newer);
  auto too_new = DbReader::Open(path);
  EXPECT_EQ(too_new.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(too_new.status().message().find("newer"), std::string::npos);
}

// A manifest can lie. Counts of 2^40, 2^63 - 1 or -5 (with the
// shard's count to match, so the sums agree), a huge shape or class count:
// each is Corruption naming what is wrong, before anything is allocated by it.
TEST(Db, ATamperedManifestIsCorruptionNotACrash) {
  const std::vector<std::pair<std::string, std::string>> lies = {
      {"1099511627776", "more than a file of"},                // 2^40
      {"9223372036854775807", "more than a file of"},          // 2^63 - 1
      {"-5", "not a non-negative integer"},
      {"110", "records hold samples 0..99, the manifest says 0..109"},  // plausible, but not there
      {"90", "records hold samples 0..99, the manifest says 0..89"},
  };
  for (const auto& [count, expected] : lies) {
    TempDir dir;
    const std::string path = dir.Sub("db");
    WriteDb(path, 100, 1);
    const std::string manifest_path = path + "/" + format::kManifestFile;
    std::string text = testing::ReadFile(manifest_path);
    // The train split and its one shard both say 100.
    const std::string honest = "\"count\": 100";
    for (size_t at = text.find(honest); at != std::string::npos; at = text.find(honest, at)) {
      text.replace(at, honest.size(), "\"count\": " + count);
    }
    testing::WriteFile(manifest_path, text);
    Status s = DbReader::Open(path).status();
    if (s.ok()) {  // caught when the record index is built
      auto db = DbReader::Open(path);
      auto reader = SplitReader::Create(*db.value(), "train");
      ASSERT_TRUE(reader.ok());
      s = reader.value()->LoadIndex();
    }
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << count << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << count << ": " << s.message();
  }
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"num_classes\": 10", "\"num_classes\": 1000000000000"},
           {"\"num_classes\": 10", "\"num_classes\": -3"},
           // Found by the manifest fuzz target: a float out of int64's range
           // was cast (undefined behaviour); floats are not integers here.
           {"\"num_classes\": 10", "\"num_classes\": 1111111111111111111111111111111111111111111111112"},
           {"\"num_classes\": 10", "\"num_classes\": 10.5"},
           {"\"format_version\": 1", "\"format_version\": 18446744073709551615"},
           {"\"count\": 10", "\"count\": 1e300"},
           {"4,\n", "4.0e99,\n"},
           {"4,\n", "4000000000,\n"}}) {  // the image field's last dim
    TempDir dir;
    const std::string path = dir.Sub("db");
    WriteDb(path, 10, 1);
    const std::string manifest_path = path + "/" + format::kManifestFile;
    std::string text = testing::ReadFile(manifest_path);
    ASSERT_NE(text.find(from), std::string::npos) << text;
    text.replace(text.find(from), from.size(), to);
    testing::WriteFile(manifest_path, text);
    Status s = DbReader::Open(path).status();
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << to << ": " << s.ToString();
  }
}

TEST(Db, TruncatedShardFileIsCorruption) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  WriteDb(path, 200, 1);
  fs::resize_file(path + "/train/shard-00000.mdb", 4096);
  auto db = DbReader::Open(path);
  EXPECT_EQ(db.status().code(), Status::Code::kCorruption);
  EXPECT_NE(db.status().message().find("train/shard-00000.mdb"), std::string::npos) << db.status().message();
}

TEST(Db, FlippedByteInAStoredRecordNamesShardAndKey) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  WriteDb(path, 40, 1);
  std::string shard = testing::ReadFile(path + "/train/shard-00000.mdb");
  // Find record 17's value in the file by its bytes and flip its last byte;
  // every copy, since LMDB's freed pages may still hold stale ones.
  RecordEncoder enc(SmallSchema(), 3);
  const std::string value = EncodeSample(enc, 17, 0).value;
  int copies = 0;
  for (size_t at = shard.find(value); at != std::string::npos; at = shard.find(value, at + 1), ++copies) {
    shard[at + value.size() - 1] ^= 0x40;
  }
  ASSERT_GT(copies, 0);
  testing::WriteFile(path + "/train/shard-00000.mdb", shard);

  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok());
  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(reader.ok());
  const FieldView* rec = nullptr;
  for (uint64_t i = 0; i < 40; ++i) {
    Status s = reader.value()->Read(i, &rec);
    if (i == 17) {
      EXPECT_EQ(s.code(), Status::Code::kCorruption);
      EXPECT_NE(s.message().find("train/shard-00000.mdb, key 17"), std::string::npos) << s.message();
    } else {
      EXPECT_TRUE(s.ok()) << i << ": " << s.ToString();
    }
  }
}

TEST(Db, ConcurrentReadersSeeTheSameRecords) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  WriteDb(path, 500, 2);
  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto reader = SplitReader::Create(*db.value(), "train");
      if (!reader.ok()) {
        ++failures;
        return;
      }
      const FieldView* rec = nullptr;
      for (int round = 0; round < 5; ++round) {
        for (uint64_t i = t; i < 500; i += 3) {
          if (!reader.value()->Read(i, &rec).ok() || rec[0].data[0] != static_cast<uint8_t>(i % 251)) {
            ++failures;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// Staged records are read from the copy staged (a record changed in the file
// since reads as it was), by every reader of the split; past the budget or
// after Unstage they are read from the file again.
TEST(Db, StagedRecordsAreReadFromTheirStagedCopyByEveryReader) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  WriteDb(path, 500, 2);
  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok());
  auto stager = SplitReader::Create(*db.value(), "train");
  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(stager.ok() && reader.ok());
  ASSERT_TRUE(stager.value()->Stage(0, 500, 1 << 30).ok());  // both shards
  // Damage every stored record's bytes in the files: checksums no longer match.
  const uint64_t budget_for_none = 0;
  for (const ShardInfo& shard : db.value()->manifest().splits[0].shards) {
    std::fstream f(path + "/" + shard.path, std::ios::in | std::ios::out | std::ios::binary);
    std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (size_t k = 8192; k < file.size(); ++k) file[k] = static_cast<char>(~file[k]);  // past LMDB's meta pages
    f.seekp(0);
    f.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  const FieldView* rec = nullptr;
  for (uint64_t i = 0; i < 500; i += 7) {
    ASSERT_TRUE(reader.value()->Read(i, &rec).ok()) << i;
    EXPECT_EQ(rec[0].data[0], static_cast<uint8_t>(i % 251));
  }
  std::string_view stored;
  uint32_t samples = 0;
  uint64_t payload = 0;
  EXPECT_TRUE(reader.value()->ReadStored(250, &stored, &samples, &payload).ok());

  // A new range staged with no room: it is not staged, the oldest go, and
  // reads see the file.
  ASSERT_TRUE(stager.value()->Stage(0, 10, budget_for_none).ok());
  EXPECT_EQ(reader.value()->Read(5, &rec).code(), Status::Code::kCorruption);
  Status damaged = reader.value()->Read(400, &rec);
  EXPECT_EQ(damaged.code(), Status::Code::kCorruption) << damaged.ToString();
  EXPECT_NE(damaged.message().find("train/shard-00001.mdb"), std::string::npos) << damaged.message();
  ASSERT_TRUE(stager.value()->Stage(0, 500, 1 << 30).ok());  // staged again: the file is damaged now
  EXPECT_EQ(reader.value()->Read(3, &rec).code(), Status::Code::kCorruption);
  stager.value()->Unstage();
  EXPECT_EQ(reader.value()->Read(123, &rec).code(), Status::Code::kCorruption);
}

// Records of 1..5 samples over 3 shards: every sample is found, in any order.
TEST(Db, RecordsOfSeveralSamplesAreReadSampleBySample) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  const uint64_t n = 300;
  {
    DbWriterOptions o;
    o.path = path;
    o.schema = SmallSchema();
    o.shards_per_split = 3;
    auto writer = DbWriter::Create(o);
    ASSERT_TRUE(writer.ok());
    RecordEncoder enc(o.schema, 3);
    ASSERT_TRUE(writer.value()->BeginSplit("train", n).ok());
    std::vector<std::string> images;
    std::vector<int64_t> labels;
    for (uint64_t i = 0; i < n;) {
      const uint64_t m = std::min<uint64_t>(1 + i % 5, n - i);
      images.assign(m, std::string(16, '\0'));
      labels.assign(m, 0);
      std::vector<SampleInput> samples;
      for (uint64_t k = 0; k < m; ++k) {
        for (int b = 0; b < 16; ++b) images[k][b] = static_cast<char>((i + k + b) % 251);
        labels[k] = static_cast<int64_t>((i + k) % 10);
        samples.push_back({{images[k].data(), 16, {}}, {&labels[k], 8, {}}});
      }
      std::string value;
      std::vector<uint64_t> hashes;
      ASSERT_TRUE(enc.Encode(samples, &value, &hashes).ok());
      ASSERT_TRUE(writer.value()->Append(value, hashes).ok());
      i += m;
    }
    ASSERT_TRUE(writer.value()->EndSplit().ok());
    ASSERT_TRUE(writer.value()->Finish(Manifest()).ok());
  }
  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  const SplitInfo& split = db.value()->manifest().splits[0];
  ASSERT_EQ(split.shards.size(), 3u);
  EXPECT_EQ(split.shards[0].first, 0u);
  EXPECT_GT(split.shards[1].count, 0u);
  EXPECT_EQ(split.shards[1].first, split.shards[0].count);
  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(reader.ok());
  const FieldView* f = nullptr;
  for (uint64_t step : {1, 7, 97}) {  // sequential and scattered orders
    for (uint64_t k = 0; k < n; ++k) {
      const uint64_t i = (k * step) % n;
      ASSERT_TRUE(reader.value()->Read(i, &f).ok()) << i;
      EXPECT_EQ(f[0].data[3], static_cast<uint8_t>((i + 3) % 251)) << i;
      int64_t label;
      std::memcpy(&label, f[1].data, 8);
      EXPECT_EQ(label, static_cast<int64_t>(i % 10)) << i;
    }
  }
  EXPECT_EQ(reader.value()->Read(n, &f).code(), Status::Code::kNotFound);
}

// Byte k of sample i's blob: incompressible, so big blobs stay big on disk.
uint8_t BlobByte(uint64_t i, size_t k) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (k * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 31;
  return static_cast<uint8_t>(x * 0x94D049BB133111EBull >> 56);
}

// Reads go through the record index and pread: values small enough to sit in
// a B-tree leaf and values on overflow pages of many pages, in two shards,
// read back in a scattered order; WillNeed never fails loudly.
TEST(Db, RecordsOfAnySizeReadBackInAnyOrder) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  const uint64_t n = 240;
  auto size_of = [](uint64_t i) { return static_cast<size_t>(i % 3 == 0 ? 1 + i % 50 : (i * 997) % 40000); };
  Schema schema;
  schema.fields = {{"blob", DType::kUInt8, {kVariableDim}}, {"label", DType::kInt64, {}}};
  {
    DbWriterOptions o;
    o.path = path;
    o.schema = schema;
    o.shards_per_split = 2;
    auto writer = DbWriter::Create(o);
    ASSERT_TRUE(writer.ok());
    RecordEncoder enc(schema, 1);
    ASSERT_TRUE(writer.value()->BeginSplit("train", n).ok());
    for (uint64_t i = 0; i < n; ++i) {
      std::string blob(size_of(i), '\0');
      for (size_t k = 0; k < blob.size(); ++k) blob[k] = static_cast<char>(BlobByte(i, k));
      const int64_t label = static_cast<int64_t>(i);
      std::string value;
      uint64_t hash = 0;
      ASSERT_TRUE(enc.EncodeOne({{blob.data(), blob.size(), {static_cast<int64_t>(blob.size())}},
                                 {&label, sizeof(label), {}}},
                                &value, &hash)
                      .ok());
      ASSERT_TRUE(writer.value()->Append(value, {hash}).ok());
    }
    ASSERT_TRUE(writer.value()->EndSplit().ok());
    ASSERT_TRUE(writer.value()->Finish(Manifest()).ok());
  }
  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_EQ(db.value()->manifest().splits[0].shards.size(), 2u);
  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(reader.ok());
  const FieldView* f = nullptr;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t i = (k * 101 + 17) % n;  // 101 is prime to n: a permutation
    reader.value()->Advise((i * 7) % n, (i * 7) % n + 1, SplitReader::Advice::kWillNeed);
    ASSERT_TRUE(reader.value()->Read(i, &f).ok()) << i;
    ASSERT_EQ(f[0].shape, Shape{static_cast<int64_t>(size_of(i))}) << i;
    size_t wrong = 0;
    for (size_t b = 0; b < size_of(i); ++b) wrong += f[0].data[b] != BlobByte(i, b);
    EXPECT_EQ(wrong, 0u) << i;
    int64_t label;
    std::memcpy(&label, f[1].data, 8);
    EXPECT_EQ(label, static_cast<int64_t>(i));
  }
  reader.value()->Advise(n + 5, n + 6, SplitReader::Advice::kWillNeed);  // out of range: a no-op
  EXPECT_EQ(reader.value()->Read(n, &f).code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace granary
