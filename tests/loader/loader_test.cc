// The loader follows the sampler: any thread count, a restored position,
// epochs back to back or abandoned, and leaks nothing across epochs and dbs.
#include "loader/loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "store/db.h"
#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;
using testing::WriteTinyDb;

class LoaderThreads : public ::testing::TestWithParam<int> {};

TEST_P(LoaderThreads, BatchesFollowTheSamplerExactly) {
  TempDir dir;
  WriteTinyDb(dir.Sub("db"), 157);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  LoaderOptions o;
  o.batch_size = 10;
  o.threads = GetParam();
  o.prefetch = 3;
  o.sampler = {5, false, 1, 2};
  o.scale = 1.0f;
  auto loader = Loader::Create(*db.value(), o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ(loader.value()->batches_per_epoch(), 8u);  // 79 samples per rank
  for (uint64_t epoch : {0, 1}) {
    std::vector<uint64_t> expected = loader.value()->sampler().EpochIndices(epoch);
    loader.value()->StartEpoch(epoch);
    Batch batch;
    size_t at = 0;
    uint64_t batches = 0;
    for (;;) {
      auto more = loader.value()->Next(&batch);
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      if (!more.value()) break;
      EXPECT_EQ(batch.index, batches++);
      EXPECT_EQ(batch.input_shape, (Shape{static_cast<int64_t>(batch.size), 1, 2, 2}));
      for (size_t i = 0; i < batch.size; ++i, ++at) {
        ASSERT_LT(at, expected.size());
        EXPECT_EQ(batch.input[i * 4 + 3], static_cast<float>(expected[at] % 200));
        EXPECT_EQ(batch.target[i], static_cast<int64_t>(expected[at] % 10));
      }
    }
    EXPECT_EQ(at, expected.size());
    EXPECT_EQ(batches, 8u);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, LoaderThreads, ::testing::Values(1, 2, 3));

// Batches consumed, state saved at a random point, and the epoch continued
// by loaders of another world size: every sample exactly once (plus padding).
TEST(Loader, RestoredStateContinuesTheEpochWithAnyWorldSize) {
  TempDir dir;
  const uint64_t n = 200;  // image values i % 200 identify the samples
  WriteTinyDb(dir.Sub("db"), n);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  std::mt19937 rng(5);
  auto make = [&](int rank, int world) {
    LoaderOptions o;
    o.batch_size = 7;
    o.threads = 2;
    o.scale = 1.0f;
    o.sampler = {9, false, rank, world};
    auto loader = Loader::Create(*db.value(), o);
    EXPECT_TRUE(loader.ok());
    return std::move(loader).value();
  };
  auto id = [](const Batch& b, size_t i) { return static_cast<int>(b.input[i * 4]); };
  for (int trial = 0; trial < 10; ++trial) {
    const int w1 = 1 + static_cast<int>(rng() % 4), w2 = 1 + static_cast<int>(rng() % 4);
    std::map<int, int> seen;
    uint64_t position = 0;
    const uint64_t stop_after = rng() % 8;  // batches per rank before the "crash"
    for (int r = 0; r < w1; ++r) {
      auto loader = make(r, w1);
      loader->StartEpoch(2);
      Batch b;
      for (uint64_t k = 0; k < stop_after; ++k) {
        auto more = loader->Next(&b);
        ASSERT_TRUE(more.ok());
        if (!more.value()) break;
        for (size_t i = 0; i < b.size; ++i) ++seen[id(b, i)];
      }
      position = loader->state().position;  // the same on every rank
      EXPECT_EQ(loader->state().epoch, 2u);
    }
    uint64_t padded = 0;
    for (int r = 0; r < w2; ++r) {
      auto loader = make(r, w2);
      loader->StartEpoch(2, position);
      padded = loader->sampler().padded(position);
      Batch b;
      for (;;) {
        auto more = loader->Next(&b);
        ASSERT_TRUE(more.ok());
        if (!more.value()) break;
        for (size_t i = 0; i < b.size; ++i) ++seen[id(b, i)];
      }
    }
    // Samples the first run read as padding past n are not "consumed" ones.
    uint64_t extra = 0;
    for (auto& [sample, count] : seen) extra += count - 1;
    EXPECT_EQ(seen.size(), n) << "w1 " << w1 << " w2 " << w2 << " after " << stop_after;
    const uint64_t first_run_padding = stop_after * 7 * w1 > n ? std::min<uint64_t>(stop_after * 7 * w1, (n + w1 - 1) / w1 * w1) - n : 0;
    EXPECT_EQ(extra, padded + first_run_padding) << "w1 " << w1 << " w2 " << w2 << " after " << stop_after;
  }
}

// Workers run into the next epoch ahead of the consumer; abandoning an epoch
// midway, or jumping to another, still yields exactly the sampler's order.
TEST(Loader, EpochsBackToBackOrAbandonedFollowTheSampler) {
  TempDir dir;
  WriteTinyDb(dir.Sub("db"), 90);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  LoaderOptions o;
  o.batch_size = 8;
  o.threads = 2;
  o.prefetch = 6;
  o.scale = 1.0f;
  o.sampler.seed = 4;
  auto loader = Loader::Create(*db.value(), o);
  ASSERT_TRUE(loader.ok());
  auto read_epoch = [&](uint64_t epoch, size_t max_batches) {
    std::vector<uint64_t> got;
    Batch b;
    for (size_t k = 0; k < max_batches; ++k) {
      auto more = loader.value()->Next(&b);
      EXPECT_TRUE(more.ok());
      if (!more.value()) break;
      EXPECT_EQ(b.epoch, epoch);
      for (size_t i = 0; i < b.size; ++i) got.push_back(static_cast<uint64_t>(b.input[i * 4]));
    }
    return got;
  };
  for (uint64_t epoch : {0, 1, 2, 5, 6}) {  // 2 -> 5 jumps: a restart
    loader.value()->StartEpoch(epoch);
    const size_t limit = epoch == 1 ? 3 : 100;  // epoch 1 is abandoned after 3 batches
    std::vector<uint64_t> got = read_epoch(epoch, limit);
    std::vector<uint64_t> want = loader.value()->sampler().EpochIndices(epoch);
    if (limit == 3) want.resize(24);
    EXPECT_EQ(got, want) << "epoch " << epoch;
  }
}


size_t EntriesIn(const char* dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

// Resources: 100 loader epochs (some abandoned half way) and 10 dbs
// opened, read and closed leave this process with the file descriptors and
// threads it had before; RSS stays within a small bound of the first round's.
TEST(Loader, NoDescriptorsThreadsOrMemoryLeakAcrossEpochsAndDbs) {
  TempDir dir;
  WriteTinyDb(dir.Sub("db"), 300);
  const size_t fds_before = EntriesIn("/proc/self/fd"), threads_before = EntriesIn("/proc/self/task");
  auto rss_kib = [] {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return 0L;
  };
  long rss_after_first = 0;
  for (int round = 0; round < 10; ++round) {
    auto db = DbReader::Open(dir.Sub("db"));
    ASSERT_TRUE(db.ok());
    LoaderOptions o;
    o.batch_size = 16;
    o.threads = 3;
    o.prefetch = 4;
    o.sampler.seed = static_cast<uint64_t>(round);
    auto loader = Loader::Create(*db.value(), o);
    ASSERT_TRUE(loader.ok());
    Batch b;
    for (uint64_t epoch = 0; epoch < 10; ++epoch) {
      loader.value()->StartEpoch(epoch);
      const size_t stop_after = epoch % 3 == 2 ? 5 : SIZE_MAX;  // abandon some epochs half way
      uint64_t samples = 0;
      for (size_t k = 0; k < stop_after; ++k) {
        auto more = loader.value()->Next(&b);
        ASSERT_TRUE(more.ok()) << more.status().ToString();
        if (!more.value()) break;
        samples += b.size;
      }
      if (stop_after == SIZE_MAX) {
        EXPECT_EQ(samples, 300u);
      }
    }
    EXPECT_GT(EntriesIn("/proc/self/task"), threads_before);  // the workers run while it lives
    loader.value().reset();
    db.value().reset();
    EXPECT_EQ(EntriesIn("/proc/self/fd"), fds_before) << "round " << round;
    EXPECT_EQ(EntriesIn("/proc/self/task"), threads_before) << "round " << round;
    if (round == 0) rss_after_first = rss_kib();
  }
  EXPECT_LT(rss_kib() - rss_after_first, 4 * 1024) << "RSS grew by more than 4 MiB over 9 more rounds";
}

}  // namespace
}  // namespace granary
