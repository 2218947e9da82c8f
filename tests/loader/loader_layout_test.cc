// What a batch holds: augmentation deterministic and equal on every path,
// uint8 and channels-last batches with the pixels in their layout.
#include "loader/loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "loader/augment.h"
#include "store/db.h"
#include "tests/loader/image_db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;
using testing::WriteTinyDb;

// Augmented batches are the same for any thread count, and per-channel
// normalisation applies after augmentation.
TEST(Loader, AugmentedBatchesAreDeterministic) {
  TempDir dir;
  WriteTinyDb(dir.Sub("db"), 64);
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
