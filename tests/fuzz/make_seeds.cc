// Writes seed inputs for the fuzz targets: valid records of every fuzzed
// schema (plain, zstd, zstd with dictionary; one and several samples) and a
// valid manifest. Usage: make_seeds RECORD_DIR MANIFEST_DIR
#define GRANARY_FUZZ_NO_MAIN
#include "tests/fuzz/record_fuzz.cc"

#include <fstream>

#include "store/manifest.h"

namespace {

void Write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

int main(int argc, char** argv) {
  using namespace granary;
  if (argc != 3) return 2;
  int n = 0;
  for (uint8_t selector : {0, 1, 2, 0x80, 0x81, 0x82}) {
    const Schema schema = fuzz::SchemaFor(selector);
    for (int level : {0, 3}) {
      RecordEncoder enc(schema, level, (selector & 0x80) ? fuzz::Dictionary(3) : nullptr);
      std::vector<std::string> bytes;
      std::vector<SampleInput> samples;
      for (int s = 0; s < 3; ++s) {
        SampleInput in;
        for (const FieldSpec& f : schema.fields) {
          Shape shape = f.shape;
          for (int64_t& d : shape) d = d == kVariableDim ? s + 1 : d;
          bytes.emplace_back(NumElements(shape) * DTypeBytes(f.dtype), static_cast<char>(s + 1));
        }
        samples.push_back(in);
      }
      size_t b = 0;
      for (int s = 0; s < 3; ++s) {
        for (const FieldSpec& f : schema.fields) {
          Shape shape = f.shape;
          for (int64_t& d : shape) d = d == kVariableDim ? s + 1 : d;
          samples[s].push_back({bytes[b].data(), bytes[b].size(), shape});
          ++b;
        }
      }
      for (size_t count : {size_t{1}, size_t{3}}) {
        std::string value;
        std::vector<SampleInput> some(samples.begin(), samples.begin() + count);
        if (!enc.Encode(some, &value).ok()) return 1;
        Write(std::string(argv[1]) + "/seed" + std::to_string(n++), std::string(1, static_cast<char>(selector)) + value);
      }
    }
  }
  Manifest m;
  m.format_version = 1;
  m.builder = "granary prep";
  m.schema = fuzz::SchemaFor(0);
  m.label_field = "label";
  m.num_classes = 2;
  m.class_names = {"a", "b"};
  m.codec = "zstd";
  m.zstd_level = 3;
  m.dictionary_path = "zstd.dict";
  m.dictionary_bytes = 10;
  m.dictionary_hash = FormatHash(1);
  m.splits = {{"train", 3, {{"train/shard-00000.mdb", 0, 2, 8192}, {"train/shard-00001.mdb", 2, 1, 8192}}, FormatHash(2)}};
  m.rejected = {{"train", "x.png", "not an image"}};
  Write(std::string(argv[2]) + "/seed0", ManifestToJson(m));
  return 0;
}
