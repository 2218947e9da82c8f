// Small dbs for the loader's tests: one split "train" of uint8 images with
// int64 labels, written through the store's DbWriter.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "store/db.h"
#include "store/db_writer.h"
#include "tests/test_util.h"

namespace granary::testing {

struct ImageDbSpec {
  Shape image_shape;        // of the "image" field
  std::string layout;       // "" (CHW) or "HWC"
  int shards = 1;
  uint64_t per_record = 1;  // consecutive samples packed into one record
  Manifest manifest;        // label field, classes, ... (Finish fills the rest)
};

// Writes a db at `path` whose split "train" holds n samples;
// fill(i, &image, &label) sets sample i (the image comes sized to its shape).
inline void WriteImageDb(const std::string& path, uint64_t n, const ImageDbSpec& spec,
                         const std::function<void(uint64_t, std::string*, int64_t*)>& fill) {
  DbWriterOptions o;
  o.path = path;
  o.schema.fields = {{"image", DType::kUInt8, spec.image_shape, spec.layout}, {"label", DType::kInt64, {}}};
  o.shards_per_split = spec.shards;
  auto writer = DbWriter::Create(o);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  RecordEncoder enc(o.schema, 1);
  ASSERT_TRUE(writer.value()->BeginSplit("train", n).ok());
  std::vector<std::string> images(spec.per_record, std::string(NumElements(spec.image_shape), '\0'));
  std::vector<int64_t> labels(spec.per_record);
  for (uint64_t i = 0; i < n; i += spec.per_record) {
    std::vector<SampleInput> samples;
    for (uint64_t k = 0; k < spec.per_record && i + k < n; ++k) {
      fill(i + k, &images[k], &labels[k]);
      samples.push_back({{images[k].data(), images[k].size(), {}}, {&labels[k], 8, {}}});
    }
    std::string value;
    std::vector<uint64_t> hashes;
    ASSERT_TRUE(enc.Encode(samples, &value, &hashes).ok());
    ASSERT_TRUE(writer.value()->Append(value, hashes).ok());
  }
  ASSERT_TRUE(writer.value()->EndSplit().ok());
  ASSERT_TRUE(writer.value()->Finish(spec.manifest).ok());
}

// A db whose "train" split has n samples in 2 shards: image (1x2x2 uint8)
// all equal to i % 200, label i % 10.
inline ImageDbSpec TinySpec() {
  ImageDbSpec spec;
  spec.image_shape = {1, 2, 2};
  spec.shards = 2;
  spec.manifest.label_field = "label";
  spec.manifest.num_classes = 10;
  return spec;
}

inline void WriteTinyDb(const std::string& path, uint64_t n) {
  WriteImageDb(path, n, TinySpec(), [](uint64_t i, std::string* image, int64_t* label) {
    image->assign(4, static_cast<char>(i % 200));
    *label = static_cast<int64_t>(i % 10);
  });
}

// Flips a byte in the middle of every stored copy of the record holding the
// one sample (`image`, `label`) of a WriteImageDb db (per_record 1) in its
// shard file `shard_path`; returns how many copies it found.
inline int CorruptStoredSample(const std::string& shard_path, const ImageDbSpec& spec, const std::string& image,
                               int64_t label) {
  std::string shard = ReadFile(shard_path);
  RecordEncoder enc({{{"image", DType::kUInt8, spec.image_shape, spec.layout}, {"label", DType::kInt64, {}}}}, 1);
  std::string value;
  if (!enc.EncodeOne({{image.data(), image.size(), {}}, {&label, 8, {}}}, &value).ok()) return 0;
  int copies = 0;
  for (size_t at = shard.find(value); at != std::string::npos; at = shard.find(value, at + 1), ++copies) {
    shard[at + value.size() / 2] ^= 0x10;
  }
  WriteFile(shard_path, shard);
  return copies;
}

}  // namespace granary::testing
