#include "preprocess/sample_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "preprocess/build.h"
#include "preprocess/source.h"
#include "store/db.h"
#include "store/db_directory.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// 6 x 6 uint8 images whose pixels spell their index (pixel k of image n is
// n + k, and one in five is noise-free zeros, so a dictionary may pay), and
// an int64 label n % 10.
std::vector<Sample> Samples(int count) {
  std::vector<Sample> out(count);
  for (int n = 0; n < count; ++n) {
    std::string image(36, '\0');
    for (int k = 0; k < 36 && n % 5 != 0; ++k) image[k] = static_cast<char>(n + k);
    const int64_t label = n % 10;
    out[n].fields = {image, std::string(reinterpret_cast<const char*>(&label), 8)};
  }
  return out;
}

SampleWriterOptions Options(const std::string& path, int threads) {
  SampleWriterOptions o;
  o.db_path = path;
  o.threads = threads;
  o.dictionary_samples = 256;  // decided after 512 samples: the test's splits hold more
  o.schema.fields = {{"image", DType::kUInt8, {1, 6, 6}, "CHW"}, {"label", DType::kInt64, {}, ""}};
  return o;
}

// `samples` as the IDX files of a folder "raw" in `dir`, opened as prep opens it.
StatusOr<Source> IdxSourceOf(const TempDir& dir, const std::vector<Sample>& samples) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  const auto n = static_cast<uint32_t>(samples.size());
  std::string images = std::string("\0\0\x08\x03", 4) + be32(n) + be32(6) + be32(6);
  std::string labels = std::string("\0\0\x08\x01", 4) + be32(n);
  for (const Sample& s : samples) {
    images += s.fields[0];
    labels.push_back(s.fields[1][0]);
  }
  std::filesystem::create_directories(dir.Sub("raw"));
  testing::WriteFile(dir.Sub("raw/train-images-idx3-ubyte"), images);
  testing::WriteFile(dir.Sub("raw/train-labels-idx1-ubyte"), labels);
  return OpenIdxSource(dir.Sub("raw"), {});
}

// Writes `samples` as split "train" in Add calls of `batch` samples.
StatusOr<SampleWriterSummary> Write(const SampleWriterOptions& o, const std::vector<Sample>& samples, size_t batch) {
  GRANARY_ASSIGN_OR_RETURN(auto writer, SampleWriter::Create(o));
  GRANARY_RETURN_IF_ERROR(writer->BeginSplit("train"));
  for (size_t k = 0; k < samples.size(); k += batch) {
    std::vector<Sample> part(samples.begin() + k, samples.begin() + std::min(samples.size(), k + batch));
    GRANARY_RETURN_IF_ERROR(writer->Add(std::move(part)));
  }
  GRANARY_RETURN_IF_ERROR(writer->EndSplit());
  return writer->Finish({"label", 10, {}, {}});
}

// Any batching and thread count gives the same records, read back sample for
// sample, with a dictionary decided on the held samples.
TEST(SampleWriter, RecordsDoNotDependOnBatchesOrThreads) {
  TempDir dir;
  const std::vector<Sample> samples = Samples(3000);
  std::string first_hash;
  for (auto [batch, threads] : {std::pair<size_t, int>{1, 1}, {7, 2}, {1000, 0}}) {
    const std::string path = dir.Sub("db" + std::to_string(batch));
    auto summary = Write(Options(path, threads), samples, batch);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    ASSERT_EQ(summary->splits.size(), 1u);
    EXPECT_EQ(summary->splits[0].written, 3000u);
    if (first_hash.empty()) first_hash = summary->content_hash;
    EXPECT_EQ(summary->content_hash, first_hash) << "batch " << batch;
    auto db = DbReader::Open(path);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ(db.value()->manifest().label_field, "label");
    auto reader = SplitReader::Create(*db.value(), "train");
    ASSERT_TRUE(reader.ok());
    for (uint64_t n : {0u, 1u, 511u, 512u, 2999u}) {
      const FieldView* f = nullptr;
      ASSERT_TRUE(reader.value()->Read(n, &f).ok());
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(f[0].data), f[0].bytes), samples[n].fields[0]) << n;
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(f[1].data), f[1].bytes), samples[n].fields[1]) << n;
    }
  }
}

// The same samples through BuildDb (an IDX source) and through SampleWriter
// have the same content hash.
TEST(SampleWriter, SameContentHashAsPrepOfTheSameSamples) {
  TempDir dir;
  const std::vector<Sample> samples = Samples(700);
  auto ours = Write(Options(dir.Sub("ours"), 2), samples, 100);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  auto source = IdxSourceOf(dir, samples);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  BuildOptions b;
  b.db_path = dir.Sub("prep");
  auto theirs = BuildDb(source.value(), b);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ(ours->content_hash, theirs->content_hash);
}

// A sample that does not fit the schema is named by split and index, and the
// writer fails from then on; destroyed unfinished, it leaves no db.
TEST(SampleWriter, ABadSampleIsNamedAndNoDbIsLeft) {
  TempDir dir;
  const std::string path = dir.Sub("bad");
  std::vector<Sample> samples = Samples(20);
  samples[13].fields[0].resize(35);
  {
    SampleWriterOptions o = Options(path, 1);
    o.dictionary = DictionaryMode::kOff;  // written at once, not held
    auto writer = SampleWriter::Create(o);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer.value()->BeginSplit("train").ok());
    Status s = writer.value()->Add(samples);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(s.message().find("split 'train', sample 13"), std::string::npos) << s.message();
    EXPECT_FALSE(writer.value()->EndSplit().ok());
    EXPECT_FALSE(writer.value()->BeginSplit("test").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(path + ".partial"));  // kept for a resume; the next write replaces it
  auto twice = Write(Options(path, 1), Samples(3), 1);
  ASSERT_TRUE(twice.ok());
  auto writer = SampleWriter::Create(Options(dir.Sub("x"), 1));
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer.value()->BeginSplit("a").ok());
  EXPECT_FALSE(writer.value()->BeginSplit("b").ok());  // "a" is still open
  ASSERT_TRUE(writer.value()->EndSplit().ok());
  EXPECT_EQ(writer.value()->BeginSplit("a").code(), Status::Code::kInvalidArgument);  // written already
  EXPECT_EQ(writer.value()->Finish({"nope", 0, {}, {}}).status().code(), Status::Code::kInvalidArgument);
}

// A write stopped midway (the writer destroyed, as a killed process leaves
// it) and resumed, handed the samples that follow resumed().samples, makes
// the db an uninterrupted write makes: the first split finished, the second
// in progress, the caller's state kept. Another fingerprint is refused,
// naming it, and keeps the partial directory.
TEST(SampleWriter, AnInterruptedWriteResumesToTheSameDb) {
  TempDir dir;
  const std::vector<Sample> train = Samples(3000), test = Samples(1300);
  auto options = [&](const std::string& path, bool resume, const std::string& fingerprint) {
    SampleWriterOptions o = Options(path, 2);
    o.records_per_commit = 2;
    o.resume = resume;
    o.fingerprint = fingerprint;
    return o;
  };
  auto add = [](SampleWriter& w, const std::vector<Sample>& samples, size_t from, size_t to) {
    for (size_t k = from; k < to; k += 100) {
      Status s = w.Add(std::vector<Sample>(samples.begin() + k, samples.begin() + std::min(to, k + 100)));
      if (!s.ok()) return s;
    }
    return Status::OK();
  };
  auto whole = [&](const std::string& path) -> StatusOr<SampleWriterSummary> {
    GRANARY_ASSIGN_OR_RETURN(auto w, SampleWriter::Create(options(path, false, "f")));
    GRANARY_RETURN_IF_ERROR(w->BeginSplit("train"));
    GRANARY_RETURN_IF_ERROR(add(*w, train, 0, train.size()));
    GRANARY_RETURN_IF_ERROR(w->EndSplit());
    GRANARY_RETURN_IF_ERROR(w->BeginSplit("test"));
    GRANARY_RETURN_IF_ERROR(add(*w, test, 0, test.size()));
    GRANARY_RETURN_IF_ERROR(w->EndSplit());
    return w->Finish({"label", 10, {}, {}});
  };
  auto uninterrupted = whole(dir.Sub("whole"));
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status().ToString();

  const std::string path = dir.Sub("db");
  {
    auto w = SampleWriter::Create(options(path, true, "f"));  // nothing to resume: a fresh write
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_FALSE(w.value()->resumed().resuming);
    ASSERT_TRUE(w.value()->BeginSplit("train").ok());
    ASSERT_TRUE(add(*w.value(), train, 0, train.size()).ok());
    ASSERT_TRUE(w.value()->EndSplit().ok());
    ASSERT_TRUE(w.value()->BeginSplit("test").ok());
    w.value()->SetCallerState("state at 900");
    ASSERT_TRUE(add(*w.value(), test, 0, 900).ok());
  }  // stopped: no db, a partial directory with its journal
  ASSERT_FALSE(std::filesystem::exists(path));

  auto refused = SampleWriter::Create(options(path, true, "other samples"));
  ASSERT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("other samples"), std::string::npos) << refused.status().message();
  ASSERT_TRUE(std::filesystem::exists(path + ".partial"));

  auto w = SampleWriter::Create(options(path, true, "f"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const SampleWriterResume& at = w.value()->resumed();
  ASSERT_TRUE(at.resuming);
  ASSERT_EQ(at.finished.size(), 1u);
  EXPECT_EQ(at.finished[0], (std::pair<std::string, uint64_t>{"train", 3000}));
  EXPECT_EQ(at.split, "test");
  EXPECT_GT(at.samples, 0u);
  EXPECT_LT(at.samples, 900u);  // what was committed, not what was handed over
  EXPECT_EQ(at.caller_state, "state at 900");
  EXPECT_EQ(w.value()->BeginSplit("train").code(), Status::Code::kInvalidArgument);  // finished
  ASSERT_TRUE(w.value()->BeginSplit("test").ok());
  ASSERT_TRUE(add(*w.value(), test, at.samples, test.size()).ok());
  ASSERT_TRUE(w.value()->EndSplit().ok());
  auto resumed = w.value()->Finish({"label", 10, {}, {}});
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->content_hash, uninterrupted->content_hash);
  EXPECT_EQ(resumed->payload_bytes, uninterrupted->payload_bytes);
  ASSERT_EQ(resumed->splits.size(), 2u);
  EXPECT_EQ(resumed->splits[1].written, 1300u);
  auto db = DbReader::Open(path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

// A partial db left by prep is not resumed by a SampleWriter, nor one left by
// a SampleWriter by prep: each says who left it and how to resume it.
TEST(SampleWriter, APartialDbIsResumedOnlyByWhatLeftIt) {
  TempDir dir;
  auto source = IdxSourceOf(dir, Samples(10));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::atomic<bool> cancelled{true};
  BuildOptions b;
  b.db_path = dir.Sub("by_prep");
  b.cancel = &cancelled;  // stops before its first sample, journaled
  ASSERT_FALSE(BuildDb(source.value(), b).ok());
  SampleWriterOptions o = Options(b.db_path, 1);
  o.resume = true;
  auto w = SampleWriter::Create(o);
  EXPECT_EQ(w.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(w.status().message().find("left by an interrupted prep build"), std::string::npos) << w.status().message();

  o = Options(dir.Sub("by_python"), 1);
  o.dictionary = DictionaryMode::kOff;  // journaled at once
  {
    auto writer = SampleWriter::Create(o);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer.value()->BeginSplit("train").ok());
    ASSERT_TRUE(writer.value()->Add(Samples(10)).ok());
  }
  b.db_path = o.db_path;
  b.cancel = nullptr;
  b.resume = true;
  auto built = BuildDb(source.value(), b);
  EXPECT_EQ(built.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(built.status().message().find("left by an interrupted granary.write"), std::string::npos)
      << built.status().message();
  EXPECT_TRUE(std::filesystem::exists(o.db_path + ".partial"));
  // A reader that finds only the partial db says what continues it (once its
  // builder is gone: here the builder was this process).
  for (const auto& [path, how] : {std::pair<std::string, std::string>{dir.Sub("by_prep"), "prep build --resume"},
                                  {o.db_path, "granary.write(..., resume=True)"}}) {
    testing::WriteFile(path + ".partial/builder.pid", "999999\n");
    auto db = DbReader::Open(path);
    EXPECT_EQ(db.status().code(), Status::Code::kNotFound);
    EXPECT_NE(db.status().message().find("holds an interrupted build: " + how + " continues it"), std::string::npos)
        << db.status().message();
  }
}

// A resumed write that never continues the split in progress is not published.
TEST(SampleWriter, AResumedWriteMustContinueTheSplitInProgress) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  SampleWriterOptions o = Options(path, 1);
  o.records_per_commit = 1;
  o.dictionary = DictionaryMode::kOff;
  o.resume = true;
  {
    auto w = SampleWriter::Create(o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->BeginSplit("train").ok());
    ASSERT_TRUE(w.value()->Add(Samples(2000)).ok());
  }
  auto w = SampleWriter::Create(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w.value()->resumed().split, "train");
  ASSERT_TRUE(w.value()->BeginSplit("other").ok());
  ASSERT_TRUE(w.value()->Add(Samples(5)).ok());
  ASSERT_TRUE(w.value()->EndSplit().ok());
  auto done = w.value()->Finish({"label", 10, {}, {}});
  EXPECT_EQ(done.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(done.status().message().find("split 'train'"), std::string::npos) << done.status().message();
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A write stopped before its first commit (a notebook's loop that raised, a
// kill) holds no record: resumed, it starts the split afresh, to the db an
// uninterrupted write makes. Its journal was taken when the dictionary was
// decided, before the split reached the db; writers before 2026-12-07 put
// that split in the checkpoint as in progress, and their partial db resumes
// too (it was refused as corrupt).
TEST(SampleWriter, AWriteStoppedBeforeItsFirstCommitResumesFromItsStart) {
  TempDir dir;
  const std::vector<Sample> train = Samples(600);
  SampleWriterOptions o = Options(dir.Sub("whole"), 1);
  o.dictionary = DictionaryMode::kOff;  // decided, and journaled, at the first Add
  auto uninterrupted = Write(o, train, 100);
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.status().ToString();
  for (const bool older_checkpoint : {false, true}) {
    o.db_path = dir.Sub(older_checkpoint ? "older" : "db");
    o.resume = true;
    {
      auto w = SampleWriter::Create(o);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      ASSERT_TRUE(w.value()->BeginSplit("train").ok());
      ASSERT_TRUE(w.value()->Add(std::vector<Sample>(train.begin(), train.begin() + 100)).ok());
    }  // stopped: far from a commit
    const std::string journal = o.db_path + ".partial/" + kJournalFile;
    nlohmann::json j = nlohmann::json::parse(testing::ReadFile(journal));
    nlohmann::json checkpoint = nlohmann::json::parse(j.at("checkpoint").get<std::string>());
    EXPECT_TRUE(checkpoint.at("current").is_null()) << checkpoint.dump();
    if (older_checkpoint) {
      SplitSummary begun;
      begun.name = "train";
      checkpoint["current"] = SplitSummaryToJson(begun);
      j["checkpoint"] = checkpoint.dump();
      testing::WriteFile(journal, j.dump());
    }
    auto w = SampleWriter::Create(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_TRUE(w.value()->resumed().resuming);
    EXPECT_EQ(w.value()->resumed().split, "");
    EXPECT_EQ(w.value()->resumed().samples, 0u);
    ASSERT_TRUE(w.value()->BeginSplit("train").ok());
    ASSERT_TRUE(w.value()->Add(train).ok());
    ASSERT_TRUE(w.value()->EndSplit().ok());
    auto resumed = w.value()->Finish({"label", 10, {}, {}});
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    EXPECT_EQ(resumed->content_hash, uninterrupted->content_hash);
  }
}

}  // namespace
}  // namespace granary
