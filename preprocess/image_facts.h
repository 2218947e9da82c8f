// What decoding an image folder's images found, for the build's notes: how
// many were gray files stored as RGB, or smaller than the size they were
// enlarged to. Internal to preprocess (image_folder_source.cc, webdataset.cc).
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "preprocess/image.h"
#include "preprocess/source.h"

namespace granary {

// Per item of a split, what its decode found. The same item decoded twice
// (by the dictionary's probe and by the build) counts once. Record is
// thread-safe for distinct items; AddTo once producing is done.
class ImageFacts {
 public:
  explicit ImageFacts(size_t items) : flags_(items, 0) {}

  void Record(uint64_t index, const Image& image);

  struct Totals {
    uint64_t decoded = 0, gray = 0, enlarged = 0;
    // The smallest and largest size of the enlarged images.
    int min_width = INT_MAX, min_height = INT_MAX, max_width = 0, max_height = 0;
  };
  void AddTo(Totals* t) const;

 private:
  static constexpr uint8_t kDecoded = 1, kGray = 2, kEnlarged = 4;

  std::vector<uint8_t> flags_;  // per item: kDecoded | kGray | kEnlarged
  std::atomic<int> min_width_{INT_MAX}, min_height_{INT_MAX}, max_width_{0}, max_height_{0};
};

// Item `index` of an image split: its file's `bytes` decoded to
// `transform` (into the thread's own Image) as field 0 of *sample, its
// `label` as field 1 (int64), what the decode found recorded in *facts.
Status DecodeImageItem(std::string_view bytes, int64_t label, const ImageTransform& transform, uint64_t index,
                       ImageFacts* facts, Sample* sample);

// The notes on the images every split (`facts`) decoded to `transform`:
// all of them gray while stored as RGB; smaller than the size, and enlarged
// (with the --size that keeps them as they are, where they share one size).
std::vector<std::string> DecodedImageNotes(const std::vector<const ImageFacts*>& facts,
                                           const ImageTransform& transform);

}  // namespace granary
