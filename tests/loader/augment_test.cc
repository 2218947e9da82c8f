#include "loader/augment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace granary {
namespace {

std::vector<float> RandomImage(int c, int h, int w, int seed) {
  std::mt19937 rng(seed);
  std::vector<float> img(static_cast<size_t>(c) * h * w);
  for (float& v : img) v = static_cast<float>(rng() % 256) / 255.0f;
  return img;
}

TEST(Augment, APureFunctionOfItsKey) {
  AugmentOptions o;
  o.random_resized_crop = true;
  o.crop_padding = 2;
  o.flip = true;
  const auto original = RandomImage(3, 12, 10, 1);
  std::vector<float> scratch;
  auto run = [&](uint64_t key) {
    auto img = original;
    ApplyAugment(PlanAugment(o, key, 12, 10), 3, 12, 10, img.data(), &scratch);
    return img;
  };
  EXPECT_EQ(run(AugmentKey(1, 2, 3)), run(AugmentKey(1, 2, 3)));
  EXPECT_NE(run(AugmentKey(1, 2, 3)), run(AugmentKey(1, 3, 3)));  // another epoch
  EXPECT_NE(run(AugmentKey(1, 2, 3)), run(AugmentKey(1, 2, 4)));  // another sample
  EXPECT_NE(run(AugmentKey(1, 2, 3)), run(AugmentKey(2, 2, 3)));  // another seed
}

TEST(Augment, FlipMirrorsAboutHalfTheTime) {
  AugmentOptions o;
  o.flip = true;
  const auto original = RandomImage(2, 4, 5, 2);
  std::vector<float> scratch;
  int flipped = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    auto img = original;
    ApplyAugment(PlanAugment(o, AugmentKey(0, 0, i), 4, 5), 2, 4, 5, img.data(), &scratch);
    if (img == original) continue;
    ++flipped;
    for (int c = 0; c < 2; ++c) {
      for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 5; ++x) ASSERT_EQ(img[(c * 4 + y) * 5 + x], original[(c * 4 + y) * 5 + 4 - x]);
      }
    }
  }
  EXPECT_GT(flipped, 420);
  EXPECT_LT(flipped, 580);
}

TEST(Augment, PaddedCropShiftsTheImageAndFillsZeros) {
  AugmentOptions o;
  o.crop_padding = 3;
  std::vector<float> original(8 * 8, 1.0f);
  std::vector<float> scratch;
  bool saw_shift = false;
  for (uint64_t i = 0; i < 50; ++i) {
    auto img = original;
    ApplyAugment(PlanAugment(o, AugmentKey(4, 0, i), 8, 8), 1, 8, 8, img.data(), &scratch);
    const auto ones = std::count(img.begin(), img.end(), 1.0f);
    const auto zeros = std::count(img.begin(), img.end(), 0.0f);
    ASSERT_EQ(ones + zeros, 64);
    ASSERT_GE(ones, 25);  // at most 3 rows and 3 columns fall off
    saw_shift = saw_shift || zeros > 0;
  }
  EXPECT_TRUE(saw_shift);
}

TEST(Augment, RandomResizedCropStaysWithinTheImageValues) {
  AugmentOptions o;
  o.random_resized_crop = true;
  const auto original = RandomImage(3, 16, 16, 3);
  const auto [lo, hi] = std::minmax_element(original.begin(), original.end());
  std::vector<float> scratch;
  for (uint64_t i = 0; i < 100; ++i) {
    auto img = original;
    ApplyAugment(PlanAugment(o, AugmentKey(0, 1, i), 16, 16), 3, 16, 16, img.data(), &scratch);
    for (float v : img) {
      ASSERT_GE(v, *lo - 1e-6f);
      ASSERT_LE(v, *hi + 1e-6f);
    }
  }
}

TEST(Augment, ParsesTheFlagsCommaList) {
  auto all = ParseAugment("flip,crop,rrc");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->flip);
  EXPECT_EQ(all->crop_padding, 4);
  EXPECT_TRUE(all->random_resized_crop);
  auto none = ParseAugment("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->any());
  auto bad = ParseAugment("flip,rotate");
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--augment rotate"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace granary
