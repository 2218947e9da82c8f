#include "preprocess/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "preprocess/build.h"
#include "preprocess/source.h"
#include "store/db.h"
#include "store/shard_index.h"
#include "store/verify.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

std::string BE32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// An IDX file of `count` images of rows x cols, pixel (n, k) = n + k.
std::string ImagesIdx(uint32_t count, uint32_t rows, uint32_t cols) {
  std::string s("\0\0\x08\x03", 4);
  s += BE32(count) + BE32(rows) + BE32(cols);
  for (uint32_t n = 0; n < count; ++n) {
    for (uint32_t k = 0; k < rows * cols; ++k) s.push_back(static_cast<char>(n + k));
  }
  return s;
}

std::string LabelsIdx(uint32_t count) {
  std::string s("\0\0\x08\x01", 4);
  s += BE32(count);
  for (uint32_t n = 0; n < count; ++n) s.push_back(static_cast<char>(n % 10));
  return s;
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

StatusOr<IdxArray> Parse(const std::string& bytes) {
  return ParseIdx(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.idx");
}

TEST(Idx, ParsesImagesAndLabels) {
  auto images = Parse(ImagesIdx(3, 2, 4));
  ASSERT_TRUE(images.ok()) << images.status().ToString();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(images->dtype, DType::kUInt8);
  ASSERT_EQ(images->data.size(), 24u);
  EXPECT_EQ(images->data[8 + 3], 1 + 3);
}

TEST(Idx, ConvertsBigEndianIntegersToHostOrder) {
  std::string s("\0\0\x0C\x01", 4);
  s += BE32(2) + BE32(0x01020304) + BE32(0xFFFFFFFE);
  auto a = Parse(s);
  ASSERT_TRUE(a.ok());
  int32_t v[2];
  std::memcpy(v, a->data.data(), 8);
  EXPECT_EQ(v[0], 0x01020304);
  EXPECT_EQ(v[1], -2);
}

TEST(Idx, TruncatedDataIsRejectedWithSizes) {
  std::string s = ImagesIdx(5, 2, 2);
  auto a = Parse(s.substr(0, s.size() - 1));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("x.idx: truncated: header promises 20 data bytes, file has 19"),
            std::string::npos)
      << a.status().message();
  EXPECT_NE(Parse(s.substr(0, 10)).status().message().find("truncated inside the header"), std::string::npos);
}

TEST(Idx, NonIdxBytesAreRejected) {
  EXPECT_NE(Parse("hello world").status().message().find("not an IDX file"), std::string::npos);
  EXPECT_NE(Parse("").status().message().find("not an IDX file"), std::string::npos);
  EXPECT_NE(Parse(std::string("\0\0\x07\x01", 4)).status().message().find("type code"), std::string::npos);
  // Bytes past the data: the header is described, and what it may mean said
  // (an image file with a label file's magic reads as far as its first dim).
  std::string extra = LabelsIdx(3) + "zz";
  const std::string message = Parse(extra).status().message();
  EXPECT_NE(message.find("its header (magic 0x00000801: 1-dim uint8, 3) describes 3 data bytes, and 2 more follow"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("not the IDX file its name says"), std::string::npos) << message;
}

TEST(Idx, ReadsGzippedAndPlainFilesAlike) {
  TempDir dir;
  WriteGz(dir.Sub("a.gz"), ImagesIdx(4, 3, 3));
  testing::WriteFile(dir.Sub("b"), ImagesIdx(4, 3, 3));
  auto gz = ReadIdxFile(dir.Sub("a.gz"));
  auto plain = ReadIdxFile(dir.Sub("b"));
  ASSERT_TRUE(gz.ok()) << gz.status().ToString();
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(gz->data, plain->data);
}

TEST(Idx, TruncatedGzipIsRejectedNamingTheFile) {
  TempDir dir;
  WriteGz(dir.Sub("full.gz"), ImagesIdx(50, 8, 8));
  std::string gz = testing::ReadFile(dir.Sub("full.gz"));
  testing::WriteFile(dir.Sub("cut.gz"), gz.substr(0, gz.size() / 2));
  auto a = ReadIdxFile(dir.Sub("cut.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("cut.gz"), std::string::npos) << a.status().message();
}

TEST(Idx, FindsDatasetFilesAndNamesWhatIsMissing) {
  TempDir dir;
  EXPECT_NE(FindIdxDataset(dir.Sub("absent")).status().message().find("no such folder"), std::string::npos);
  EXPECT_NE(FindIdxDataset(dir.path()).status().message().find("folder is empty"), std::string::npos);
  testing::WriteFile(dir.Sub("notes.txt"), "hi");
  EXPECT_NE(FindIdxDataset(dir.path()).status().message().find("no IDX dataset found"), std::string::npos);
  WriteGz(dir.Sub("train-images-idx3-ubyte.gz"), ImagesIdx(4, 2, 2));
  auto missing = FindIdxDataset(dir.path());
  EXPECT_NE(missing.status().message().find("no train-labels-idx1-ubyte"), std::string::npos)
      << missing.status().message();
  testing::WriteFile(dir.Sub("train-labels.idx1-ubyte"), LabelsIdx(4));
  auto found = FindIdxDataset(dir.path());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ(found.value()[0].name, "train");
  // A second copy of a file: the same data is fine, different data is refused naming both.
  WriteGz(dir.Sub("train-labels.idx1-ubyte.gz"), LabelsIdx(4));
  EXPECT_TRUE(FindIdxDataset(dir.path()).ok());
  WriteGz(dir.Sub("train-labels.idx1-ubyte.gz"), LabelsIdx(5));
  auto both = FindIdxDataset(dir.path());
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("train-labels.idx1-ubyte and "), std::string::npos)
      << both.status().ToString();
  EXPECT_NE(both.status().message().find("train-labels.idx1-ubyte.gz are there, and they differ"), std::string::npos)
      << both.status().ToString();
}

TEST(IdxSource, LabelCountMustMatchImageCount) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(4, 2, 2));
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(3));
  auto source = OpenIdxSource(dir.path(), {});
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("3 labels for 4 images"), std::string::npos);
}

// --label names a CSV column (or CIFAR-100's label); given for IDX files it
// was ignored without a word.
TEST(IdxSource, ALabelFlagIsRefusedNotIgnored) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(4, 2, 2));
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(4));
  RawOptions options;
  options.raw = dir.path();
  EXPECT_TRUE(OpenSource(options).ok());
  options.label = "label";
  StatusOr<Source> source = OpenSource(options);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("--label label: names a column of a CSV table"), std::string::npos)
      << source.status().ToString();
}

// One stray label of 200 among 0..9 makes 201 classes: said in a note.
TEST(IdxSource, AStrayLabelIsNoted) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(10, 2, 2));
  std::string labels = LabelsIdx(10);
  labels.back() = static_cast<char>(200);
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), labels);
  auto source = OpenIdxSource(dir.path(), {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.num_classes, 201);
  ASSERT_EQ(source->info.notes.size(), 1u);
  EXPECT_NE(source->info.notes[0].find("labels run 0..200: 201 classes, 191 of which no sample has (9, 10, 11"),
            std::string::npos)
      << source->info.notes[0];
}

// An IDX file declaring 0 images (or 0-pixel images) divided by
// zero (SIGFPE); it is an error naming the file, as an empty folder is.
TEST(IdxSource, ZeroImagesOrEmptyImagesAreAnErrorNamingTheFile) {
  for (auto [count, rows] : {std::pair<uint32_t, uint32_t>{0, 2}, {3, 0}}) {
    TempDir dir;
    testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(count, rows, 2));
    testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(count));
    auto source = OpenIdxSource(dir.path(), {});
    ASSERT_FALSE(source.ok()) << count << " x " << rows;
    EXPECT_EQ(source.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(source.status().message().find(dir.Sub("train-images-idx3-ubyte") + ": declares dims"),
              std::string::npos)
        << source.status().message();
  }
}

// The flow graph writes the same bytes whatever the thread count.
TEST(Build, ContentIsIdenticalForAnyThreadCount) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(3000, 6, 6));
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(3000));
  testing::WriteFile(dir.Sub("t10k-images-idx3-ubyte"), ImagesIdx(500, 6, 6));
  testing::WriteFile(dir.Sub("t10k-labels-idx1-ubyte"), LabelsIdx(500));
  std::string hashes[2];
  for (int threads : {1, 2}) {
    auto source = OpenIdxSource(dir.path(), {});
    ASSERT_TRUE(source.ok());
    BuildOptions o;
    o.db_path = dir.Sub("db" + std::to_string(threads));
    o.threads = threads;
    o.max_in_flight = 16;
    auto summary = BuildDb(source.value(), o);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    ASSERT_EQ(summary->splits.size(), 2u);
    EXPECT_EQ(summary->splits[0].written, 3000u);
    EXPECT_EQ(summary->splits[1].written, 500u);
    hashes[threads - 1] = summary->content_hash;

    auto db = DbReader::Open(o.db_path);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(db.value()->schema().fields[0].shape, (Shape{1, 6, 6}));
    auto reader = SplitReader::Create(*db.value(), "test");
    const FieldView* rec = nullptr;
    ASSERT_TRUE(reader.value()->Read(499, &rec).ok());
    EXPECT_EQ(rec[0].data[7], static_cast<uint8_t>(499 + 7));
    int64_t label;
    std::memcpy(&label, rec[1].data, 8);
    EXPECT_EQ(label, 9);
  }
  EXPECT_EQ(hashes[0], hashes[1]);
}

// Packing samples into records of several changes the bytes, not the content.
TEST(Build, ContentHashDoesNotDependOnPacking) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(2000, 6, 6));
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(2000));
  std::string hashes[2];
  uint64_t records[2];
  for (int packed : {0, 1}) {
    auto source = OpenIdxSource(dir.path(), {});
    ASSERT_TRUE(source.ok());
    BuildOptions o;
    o.db_path = dir.Sub("db" + std::to_string(packed));
    o.block_bytes = packed ? 1500 : 1;  // 1: every sample alone
    o.shards = 2;
    auto summary = BuildDb(source.value(), o);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    hashes[packed] = summary->content_hash;
    auto db = DbReader::Open(o.db_path);
    ASSERT_TRUE(db.ok());
    auto reader = SplitReader::Create(*db.value(), "train");
    RecordDecoder decoder(db.value()->schema(), db.value()->dictionary());
    DecodedRecord rec;
    records[packed] = 0;
    for (const ShardInfo& shard : db.value()->manifest().FindSplit("train")->shards) {
      Status walk = WalkShard(o.db_path + "/" + shard.path, shard.path, shard.bytes, decoder, &rec,
                              [&](uint64_t, const Status& s) { records[packed] += s.ok(); });
      ASSERT_TRUE(walk.ok()) << walk.ToString();
    }
    const FieldView* f = nullptr;
    ASSERT_TRUE(reader.value()->Read(1234, &f).ok());
    EXPECT_EQ(f[0].data[5], static_cast<uint8_t>(1234 + 5));
  }
  EXPECT_EQ(hashes[0], hashes[1]);
  EXPECT_EQ(records[0], 2000u);
  EXPECT_LT(records[1], 200u);
}

// A db whose records need its dictionary: readable and verifiable with it,
// refused when the dictionary file is damaged.
TEST(Build, DictionaryDbsReadBackAndGuardTheirDictionary) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(3000, 8, 8));
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(3000));
  std::string hashes[2];
  for (DictionaryMode mode : {DictionaryMode::kOn, DictionaryMode::kOff}) {
    auto source = OpenIdxSource(dir.path(), {});
    ASSERT_TRUE(source.ok());
    BuildOptions o;
    o.db_path = dir.Sub(mode == DictionaryMode::kOn ? "dict" : "plain");
    o.dictionary = mode;
    o.dictionary_max_bytes = 4096;
    auto summary = BuildDb(source.value(), o);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->dictionary_bytes > 0, mode == DictionaryMode::kOn) << summary->dictionary_note;
    hashes[mode == DictionaryMode::kOn] = summary->content_hash;
    auto report = VerifyDb(o.db_path);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
    EXPECT_EQ(report->samples_ok, 3000u);
  }
  EXPECT_EQ(hashes[0], hashes[1]);

  auto db = DbReader::Open(dir.Sub("dict"));
  ASSERT_TRUE(db.ok());
  ASSERT_NE(db.value()->dictionary(), nullptr);
  auto reader = SplitReader::Create(*db.value(), "train");
  const FieldView* f = nullptr;
  ASSERT_TRUE(reader.value()->Read(2999, &f).ok());
  EXPECT_EQ(f[0].data[1], static_cast<uint8_t>(2999 + 1));

  std::string dict = testing::ReadFile(dir.Sub("dict/zstd.dict"));
  dict[dict.size() / 2] ^= 1;
  testing::WriteFile(dir.Sub("dict/zstd.dict"), dict);
  auto damaged = DbReader::Open(dir.Sub("dict"));
  EXPECT_EQ(damaged.status().code(), Status::Code::kCorruption);
  EXPECT_NE(damaged.status().message().find("zstd.dict"), std::string::npos) << damaged.status().message();
}

// --dictionary auto keeps a dictionary only when it pays for itself.
// Small tables of small records (a dictionary would outweigh them, or blocks
// already share what it would hold) get none and a db no larger than with
// --dictionary off; records that repeat a large pattern each (more than a
// block's compression finds) get one, and a smaller db. The reason is recorded.
TEST(Build, AutomaticDictionaryOnlyWhereItPays) {
  struct Case {
    const char* name;
    std::string images;
    uint32_t count;
    bool pays;
  };
  // 2304-byte images: one random pattern shared by all, plus a few bytes of
  // their own; a block of three holds the pattern once, a dictionary never.
  std::string shared_pattern(48 * 48, '\0');
  uint32_t state = 12345;
  for (char& c : shared_pattern) c = static_cast<char>((state = state * 1103515245u + 12345u) >> 24);
  std::string patterned = std::string("\0\0\x08\x03", 4) + BE32(2000) + BE32(48) + BE32(48);
  for (uint32_t n = 0; n < 2000; ++n) {
    std::string image = shared_pattern;
    for (int k = 0; k < 8; ++k) image[(n * 37 + k * 301) % image.size()] = static_cast<char>(n + k);
    patterned += image;
  }
  const Case cases[] = {{"150 tiny images", ImagesIdx(150, 2, 2), 150, false},
                        {"3000 8x8 images", ImagesIdx(3000, 8, 8), 3000, false},
                        {"2000 patterned 48x48 images", patterned, 2000, true},
                        {"6 images", ImagesIdx(6, 4, 4), 6, false}};
  for (const Case& c : cases) {
    TempDir dir;
    testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), c.images);
    testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(c.count));
    uint64_t stored[2] = {0, 0};  // shards and dictionary, by mode: off, auto
    for (DictionaryMode mode : {DictionaryMode::kOff, DictionaryMode::kAuto}) {
      auto source = OpenIdxSource(dir.path(), {});
      ASSERT_TRUE(source.ok());
      BuildOptions o;
      o.db_path = dir.Sub(mode == DictionaryMode::kAuto ? "auto" : "off");
      o.dictionary = mode;
      auto summary = BuildDb(source.value(), o);
      ASSERT_TRUE(summary.ok()) << summary.status().ToString();
      auto db = DbReader::Open(o.db_path);
      ASSERT_TRUE(db.ok());
      const Manifest& m = db.value()->manifest();
      uint64_t bytes = m.dictionary_bytes;
      for (const SplitInfo& split : m.splits) {
        for (const ShardInfo& shard : split.shards) bytes += shard.bytes;
      }
      stored[mode == DictionaryMode::kAuto] = bytes;
      if (mode != DictionaryMode::kAuto) continue;
      EXPECT_EQ(summary->dictionary_bytes > 0, c.pays) << c.name << ": " << summary->dictionary_note;
      EXPECT_EQ(m.build_options.at("dictionary_choice"), summary->dictionary_note);
      const char* said = c.pays ? "records " : c.count < 10 ? "zstd could not train one on 6 samples of 144 bytes "
                                                               "in all: too few" : "it would not pay";
      EXPECT_NE(summary->dictionary_note.find(said), std::string::npos) << c.name << ": " << summary->dictionary_note;
    }
    if (c.pays) {
      EXPECT_LT(stored[1] * 2, stored[0]) << c.name;
    } else {
      EXPECT_LE(stored[1], stored[0]) << c.name;
    }
  }
}

TEST(Build, CancelledBuildLeavesNoDb) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train-images-idx3-ubyte"), ImagesIdx(100, 2, 2));
  testing::WriteFile(dir.Sub("train-labels-idx1-ubyte"), LabelsIdx(100));
  auto source = OpenIdxSource(dir.path(), {});
  ASSERT_TRUE(source.ok());
  std::atomic<bool> cancel{true};
  BuildOptions o;
  o.db_path = dir.Sub("db");
  o.cancel = &cancel;
  auto summary = BuildDb(source.value(), o);
  EXPECT_FALSE(summary.ok());
  EXPECT_FALSE(std::filesystem::exists(o.db_path));
  // What is kept for --resume is no db.
  EXPECT_FALSE(DbReader::Open(o.db_path + ".partial").ok());
}

}  // namespace
}  // namespace granary
