// What the loader refuses and how it names it: bad options before any
// work, an empty split, a corrupt record (or, with skip_corrupt, its skip).
#include "loader/loader.h"

#include <gtest/gtest.h>

#include "store/db.h"
#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;
using testing::TinySpec;
using testing::WriteTinyDb;

TEST(Loader, RejectsBadOptionsUpFront) {
  TempDir dir;
  WriteTinyDb(dir.Sub("db"), 20);
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
  WriteTinyDb(dir.Sub("db"), 0);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto loader = Loader::Create(*db.value(), LoaderOptions{});
  EXPECT_EQ(loader.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(loader.status().message().find(dir.Sub("db") + ": split 'train': the split is empty"), std::string::npos)
      << loader.status().message();
}

TEST(Loader, CorruptRecordSurfacesAsAnErrorNamingShardAndKey) {
  TempDir dir;
  WriteTinyDb(dir.Sub("db"), 64);
  // Sample 9 (shard 0 holds 0..31) has image bytes 0x09; flip one stored byte of it.
  ASSERT_GT(
      testing::CorruptStoredSample(dir.Sub("db/train/shard-00000.mdb"), TinySpec(), std::string(4, '\x09'), 9), 0);

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

}  // namespace
}  // namespace granary
