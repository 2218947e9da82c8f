// Small dbs for the loader's tests: one split "train" of uint8 images with
// int64 labels, written through the store's DbWriter.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "store/db.h"
#include "store/db_writer.h"

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

}  // namespace granary::testing
