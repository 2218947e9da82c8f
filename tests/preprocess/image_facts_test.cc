// The build's notes on what an image folder's images were: every one gray
// while stored as RGB, or smaller than --size and enlarged.
#include "preprocess/image_facts.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

Image Decoded(bool gray, int width = 0, int height = 0) {
  Image image;
  image.gray_source = gray;
  image.enlarged = width > 0;
  image.source_width = width;
  image.source_height = height;
  return image;
}

TEST(ImageFacts, EveryImageGrayIsNotedWhereTheyAreStoredAsRgb) {
  ImageFacts train(3), test(1);
  for (uint64_t k = 0; k < 3; ++k) train.Record(k, Decoded(true));
  train.Record(1, Decoded(true));  // the dictionary's probe and the build decode an item twice: counted once
  test.Record(0, Decoded(true));
  const std::vector<std::string> notes = DecodedImageNotes({&train, &test}, {64, 64, 3});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("every image decoded (4) is grayscale, stored as 3 equal channels", 0), 0u) << notes[0];
  EXPECT_NE(notes[0].find("--channels 1 stores a third of the bytes"), std::string::npos);
  EXPECT_TRUE(DecodedImageNotes({&train, &test}, {64, 64, 1}).empty());  // --channels 1: as asked
  ImageFacts mixed(2);
  mixed.Record(0, Decoded(true));
  mixed.Record(1, Decoded(false));
  EXPECT_TRUE(DecodedImageNotes({&mixed}, {64, 64, 3}).empty());
  EXPECT_TRUE(DecodedImageNotes({}, {64, 64, 3}).empty());
  const ImageFacts none(5);  // nothing decoded (a build that copied every record)
  EXPECT_TRUE(DecodedImageNotes({&none}, {64, 64, 3}).empty());
}

TEST(ImageFacts, ImagesSmallerThanTheSizeAreNotedWithTheSizeThatKeepsThem) {
  ImageFacts same(2);
  same.Record(0, Decoded(false, 28, 28));
  same.Record(1, Decoded(false, 28, 28));
  std::vector<std::string> notes = DecodedImageNotes({&same}, {64, 64, 3});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "every image decoded (2) is 28x28, smaller than --size 64x64: enlarged to it (5.2x the pixels "
                      "to store and train on); --size 28 keeps them as they are");
  ImageFacts oblong(1);
  oblong.Record(0, Decoded(false, 32, 24));
  notes = DecodedImageNotes({&oblong}, {64, 48, 3});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--size 32x24 keeps them"), std::string::npos) << notes[0];
  // Sizes that differ, or some images large enough: how many were enlarged, and how large they were.
  ImageFacts some(3);
  some.Record(0, Decoded(false, 20, 30));
  some.Record(1, Decoded(false, 40, 10));
  some.Record(2, Decoded(false));
  notes = DecodedImageNotes({&some}, {64, 64, 3});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "2 of the 3 images decoded were smaller than --size 64x64 and enlarged to it (sizes up to 40 "
                      "wide and 30 high)");
}

}  // namespace
}  // namespace granary
