#include "loader/loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "loader/augment.h"
#include "store/db.h"
#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// A db whose "train" split has n samples in 2 shards: image (1x2x2 uint8)
// all equal to i % 200, label i % 10.
void WriteDb(const std::string& path, uint64_t n) {
  testing::ImageDbSpec spec;
  spec.image_shape = {1, 2, 2};
  spec.shards = 2;
  spec.manifest.label_field = "label";
  spec.manifest.num_classes = 10;
  testing::WriteImageDb(path, n, spec, [](uint64_t i, std::string* image, int64_t* label) {
    image->assign(4, static_cast<char>(i % 200));
    *label = static_cast<int64_t>(i % 10);
  });
}

class LoaderThreads : public ::testing::TestWithParam<int> {};

TEST_P(LoaderThreads, BatchesFollowTheSamplerExactly) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 157);
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

TEST(Loader, RejectsBadOptionsUpFront) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 20);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  LoaderOptions o;
  o.batch_size = 0;
  EXPECT_EQ(Loader::Create(*db.value(), o).status().code(), Status::Code::kInvalidArgument);
  o.batch_size = 4;
  o.sampler.world = 0;
  EXPECT_EQ(Loader::Create(*db.value(), o).status().code(), Status::Code::kInvalidArgument);
  o.sampler.world = 2;
  o.sampler.rank = 2;
  EXPECT_EQ(Loader::Create(*db.value(), o).status().code(), Status::Code::kInvalidArgument);
  o.sampler.rank = 0;
  o.input_field = "pixels";
  EXPECT_EQ(Loader::Create(*db.value(), o).status().code(), Status::Code::kInvalidArgument);
  o.input_field = "image";
  o.split = "val";
  EXPECT_EQ(Loader::Create(*db.value(), o).status().code(), Status::Code::kNotFound);
  // Out of the loader's bounds (loader.h): threads for this machine, prefetch, batch.
  o.split = "train";
  o.threads = 100000;
  EXPECT_NE(Loader::Create(*db.value(), o).status().message().find("loader threads 100000"), std::string::npos);
  o.threads = 1;
  o.prefetch = 1000000000;
  EXPECT_NE(Loader::Create(*db.value(), o).status().message().find("prefetch 1000000000: must be in 1..256"),
            std::string::npos);
  o.prefetch = 4;
  o.batch_size = size_t{1} << 30;
  EXPECT_NE(Loader::Create(*db.value(), o).status().message().find("must be in 1..1048576"), std::string::npos);
  // Within them, prefetch x batch against memory: 256 batches of 2^20 images of 3 x 512 x 512.
  testing::ImageDbSpec big;
  big.image_shape = {3, 512, 512};
  big.manifest.label_field = "label";
  big.manifest.num_classes = 2;
  testing::WriteImageDb(dir.Sub("big"), 2, big, [](uint64_t i, std::string* image, int64_t* label) {
    image->assign(3 * 512 * 512, static_cast<char>(i));
    *label = static_cast<int64_t>(i % 2);
  });
  auto big_db = DbReader::Open(dir.Sub("big"));
  ASSERT_TRUE(big_db.ok()) << big_db.status().ToString();
  o.prefetch = kMaxLoaderPrefetch;
  o.batch_size = kMaxLoaderBatch;
  EXPECT_NE(Loader::Create(*big_db.value(), o).status().message().find("more than half of this machine's"),
            std::string::npos);
}

// An empty split is named in the error.
TEST(Loader, AnEmptySplitIsNamed) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 0);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto loader = Loader::Create(*db.value(), LoaderOptions{});
  EXPECT_EQ(loader.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(loader.status().message().find(dir.Sub("db") + ": split 'train': the split is empty"), std::string::npos)
      << loader.status().message();
}

TEST(Loader, CorruptRecordSurfacesAsAnErrorNamingShardAndKey) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 64);
  // Sample 9 (shard 0 holds 0..31) has image bytes 0x09; flip one stored byte of it.
  const std::string shard_path = dir.Sub("db/train/shard-00000.mdb");
  std::string shard = testing::ReadFile(shard_path);
  RecordEncoder enc({{{"image", DType::kUInt8, {1, 2, 2}}, {"label", DType::kInt64, {}}}}, 1);
  std::string image(4, '\x09'), value;
  int64_t label = 9;
  ASSERT_TRUE(enc.EncodeOne({{image.data(), 4, {}}, {&label, 8, {}}}, &value).ok());
  int copies = 0;
  for (size_t at = shard.find(value); at != std::string::npos; at = shard.find(value, at + 1), ++copies) {
    shard[at + value.size() / 2] ^= 0x10;
  }
  ASSERT_GT(copies, 0);
  testing::WriteFile(shard_path, shard);

  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  LoaderOptions o;
  o.batch_size = 8;
  o.threads = 2;
  o.sampler.mode = ShuffleMode::kNone;
  auto loader = Loader::Create(*db.value(), o);
  ASSERT_TRUE(loader.ok());
  loader.value()->StartEpoch(0);
  Batch batch;
  auto first = loader.value()->Next(&batch);  // samples 0..7
  ASSERT_TRUE(first.ok() && first.value());
  auto second = loader.value()->Next(&batch);  // samples 8..15 include 9
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kCorruption);
  EXPECT_NE(second.status().message().find("train/shard-00000.mdb, key 9"), std::string::npos)
      << second.status().message();
  // Asking again repeats the error instead of hanging.
  EXPECT_FALSE(loader.value()->Next(&batch).ok());

  // With skip_corrupt the epoch completes without it, and it is counted.
  o.skip_corrupt = true;
  auto skipping = Loader::Create(*db.value(), o);
  ASSERT_TRUE(skipping.ok());
  skipping.value()->StartEpoch(0);
  size_t samples = 0;
  std::vector<std::string> reasons;
  for (;;) {
    auto more = skipping.value()->Next(&batch);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!more.value()) break;
    samples += batch.size;
    reasons.insert(reasons.end(), batch.skipped_reasons.begin(), batch.skipped_reasons.end());
    for (size_t i = 0; i < batch.size; ++i) EXPECT_NE(batch.target[i] * 0 + batch.input[i * 4], 9.0f / 255.0f);
  }
  EXPECT_EQ(samples, 63u);
  EXPECT_EQ(skipping.value()->stats().skipped_corrupt, 1u);
  // ... and named, with the reason.
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].rfind("sample 9: train/shard-00000.mdb, key 9: ", 0), 0u) << reasons[0];
}


// Batches consumed, state saved at a random point, and the epoch continued
// by loaders of another world size: every sample exactly once (plus padding).
TEST(Loader, RestoredStateContinuesTheEpochWithAnyWorldSize) {
  TempDir dir;
  const uint64_t n = 200;  // image values i % 200 identify the samples
  WriteDb(dir.Sub("db"), n);
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


// Augmented batches are the same for any thread count, and per-channel
// normalisation applies after augmentation.
TEST(Loader, AugmentedBatchesAreDeterministic) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 64);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto batches = [&](int threads) {
    LoaderOptions o;
    o.batch_size = 8;
    o.threads = threads;
    o.scale = 1.0f;
    o.channel_mean = {1.0f};
    o.channel_std = {2.0f};
    o.augment.flip = true;
    o.augment.crop_padding = 1;
    auto loader = Loader::Create(*db.value(), o);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    loader.value()->StartEpoch(3);
    std::vector<float> all;
    Batch b;
    while (loader.value()->Next(&b).value()) all.insert(all.end(), b.input.begin(), b.input.end());
    return all;
  };
  const auto one = batches(1);
  EXPECT_EQ(one, batches(3));
  // Values are (pixel or padding zero - 1) / 2.
  for (float v : one) ASSERT_TRUE(v == -0.5f || std::fmod(v * 2 + 1, 1.0f) == 0.0f) << v;
  EXPECT_NE(std::count(one.begin(), one.end(), -0.5f), 0);  // some padding showed

  LoaderOptions bad;
  bad.channel_mean = {0.1f, 0.2f};  // the images have one channel
  EXPECT_EQ(Loader::Create(*db.value(), bad).status().code(), Status::Code::kInvalidArgument);
}

// The loader's fused one-pass conversions of HWC images (float with shift,
// flip and per-channel normalisation; uint8 copies) give exactly what the
// reference path gives: HWC -> CHW floats, then ApplyAugment, then normalising.
TEST(Loader, FusedHwcPathsEqualApplyAugment) {
  TempDir dir;
  const int h = 7, w = 5, c = 3;
  testing::ImageDbSpec spec;
  spec.image_shape = {h, w, c};
  spec.layout = "HWC";
  testing::WriteImageDb(dir.Sub("db"), 40, spec, [&](uint64_t i, std::string* image, int64_t* label) {
    for (size_t k = 0; k < image->size(); ++k) (*image)[k] = static_cast<char>((i * 131 + k * 29) % 256);
    *label = 0;
  });
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto reader = SplitReader::Create(*db.value(), "train");
  ASSERT_TRUE(reader.ok());
  LoaderOptions o;
  o.batch_size = 40;
  o.sampler.seed = 9;
  o.sampler.mode = ShuffleMode::kNone;
  o.augment.flip = true;
  o.augment.crop_padding = 2;
  o.channel_mean = {0.4f, 0.5f, 0.6f};
  o.channel_std = {0.2f, 0.25f, 0.3f};
  for (bool uint8 : {false, true}) {
    o.uint8_batches = uint8;
    auto loader = Loader::Create(*db.value(), o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    loader.value()->StartEpoch(4);
    Batch b;
    ASSERT_TRUE(loader.value()->Next(&b).value());
    ASSERT_EQ(b.size, 40u);
    std::vector<float> expected(c * h * w), scratch;
    int flipped = 0, shifted = 0;
    for (uint64_t i = 0; i < 40; ++i) {
      const FieldView* fields = nullptr;
      ASSERT_TRUE(reader.value()->Read(i, &fields).ok());
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          for (int ch = 0; ch < c; ++ch) {
            const float v = fields[0].data[(y * w + x) * c + ch];
            expected[(ch * h + y) * w + x] = uint8 ? v : v * o.scale;
          }
        }
      }
      const AugmentPlan plan = PlanAugment(o.augment, AugmentKey(o.sampler.seed, 4, i), h, w);
      flipped += plan.flip;
      shifted += plan.shift_x != 0 || plan.shift_y != 0;
      ApplyAugment(plan, c, h, w, expected.data(), &scratch);
      for (int k = 0; k < c * h * w; ++k) {
        const int ch = k / (h * w);
        if (uint8) {
          ASSERT_EQ(b.input_u8[i * c * h * w + k], expected[k]) << "sample " << i << " value " << k;
        } else {
          const float want = (expected[k] - o.channel_mean[ch]) / o.channel_std[ch];
          ASSERT_NEAR(b.input[i * c * h * w + k], want, 1e-5) << "sample " << i << " value " << k;
        }
      }
    }
    EXPECT_GT(flipped, 0);
    EXPECT_GT(shifted, 0);
  }
}

// Workers run into the next epoch ahead of the consumer; abandoning an epoch
// midway, or jumping to another, still yields exactly the sampler's order.
TEST(Loader, EpochsBackToBackOrAbandonedFollowTheSampler) {
  TempDir dir;
  WriteDb(dir.Sub("db"), 90);
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


// An image db stored HWC (2 x 3 x 2): sample i, pixel (y, x), channel c holds
// i * 16 + y * 6 + x * 2 + c.
void WriteHwcDb(const std::string& path, uint64_t n) {
  testing::ImageDbSpec spec;
  spec.image_shape = {2, 3, 2};
  spec.layout = "HWC";
  testing::WriteImageDb(path, n, spec, [](uint64_t i, std::string* image, int64_t* label) {
    for (int k = 0; k < 12; ++k) (*image)[k] = static_cast<char>(i * 16 + k);
    *label = static_cast<int64_t>(i);
  });
}

TEST(Loader, Uint8AndChannelsLastBatchesHoldThePixelsInTheirLayout) {
  TempDir dir;
  WriteHwcDb(dir.Sub("db"), 5);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto first_batch = [&](bool u8, bool last, bool flip) {
    LoaderOptions o;
    o.batch_size = 5;
    o.sampler.mode = ShuffleMode::kNone;
    o.scale = 1.0f;
    o.uint8_batches = u8;
    o.channels_last = last;
    o.augment.flip = flip;
    auto loader = Loader::Create(*db.value(), o);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    loader.value()->StartEpoch(0);
    Batch b;
    EXPECT_TRUE(loader.value()->Next(&b).value());
    return b;
  };
  auto px = [](int i, int y, int x, int c) { return i * 16 + y * 6 + x * 2 + c; };
  Batch nchw = first_batch(true, false, false);
  EXPECT_EQ(nchw.input_shape, (Shape{5, 2, 2, 3}));
  Batch nhwc = first_batch(true, true, false);
  EXPECT_EQ(nhwc.input_shape, (Shape{5, 2, 3, 2}));
  Batch nhwc_f = first_batch(false, true, false);
  Batch nchw_f = first_batch(false, false, false);
  for (int i = 0; i < 5; ++i) {
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 3; ++x) {
        for (int c = 0; c < 2; ++c) {
          EXPECT_EQ(nchw.input_u8[i * 12 + (c * 2 + y) * 3 + x], px(i, y, x, c));
          EXPECT_EQ(nhwc.input_u8[i * 12 + (y * 3 + x) * 2 + c], px(i, y, x, c));
          EXPECT_EQ(nhwc_f.input[i * 12 + (y * 3 + x) * 2 + c], static_cast<float>(px(i, y, x, c)));
          EXPECT_EQ(nchw_f.input[i * 12 + (c * 2 + y) * 3 + x], static_cast<float>(px(i, y, x, c)));
        }
      }
    }
  }
  // A flipped uint8 sample is the mirror image of the plain one.
  Batch flipped = first_batch(true, true, true);
  int mirrored = 0;
  for (int i = 0; i < 5; ++i) {
    bool is_mirror = true;
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 3; ++x) {
        for (int c = 0; c < 2; ++c) {
          is_mirror = is_mirror && flipped.input_u8[i * 12 + (y * 3 + x) * 2 + c] == px(i, y, 2 - x, c);
        }
      }
    }
    mirrored += is_mirror;
  }
  EXPECT_GT(mirrored, 0);
  LoaderOptions bad;
  bad.uint8_batches = true;
  bad.augment.random_resized_crop = true;
  EXPECT_EQ(Loader::Create(*db.value(), bad).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

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
  WriteDb(dir.Sub("db"), 300);
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
