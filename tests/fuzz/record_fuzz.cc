// libFuzzer target: RecordDecoder::Decode on arbitrary bytes, for several
// schemas, with and without a dictionary. It must return a status, never
// crash, hang or read out of bounds (run under ASan/UBSan by tools/fuzz).
#include <cstddef>
#include <cstdint>
#include <string>

#include "store/record.h"

namespace granary::fuzz {

// The schema of an input is chosen by its first byte; bit 7 adds the dictionary.
Schema SchemaFor(uint8_t selector) {
  Schema s;
  switch (selector % 3) {
    case 0: s.fields = {{"image", DType::kUInt8, {1, 2, 2}}, {"label", DType::kInt64, {}}}; break;
    case 1: s.fields = {{"tokens", DType::kInt32, {granary::kVariableDim}}, {"label", DType::kInt64, {}}}; break;
    default:
      s.fields = {{"x", DType::kFloat32, {granary::kVariableDim, 3}}, {"y", DType::kInt16, {2, granary::kVariableDim}}};
  }
  return s;
}

std::shared_ptr<const CompressionDictionary> Dictionary(int level) {
  static std::shared_ptr<const CompressionDictionary> dict = [level] {
    std::string samples;
    std::vector<size_t> sizes;
    for (int i = 0; i < 500; ++i) {
      std::string p(64, '\0');
      for (size_t k = 0; k < p.size(); ++k) p[k] = static_cast<char>((k % 8 < 4) ? k : (i * 7 + k) % 5);
      samples += p;
      sizes.push_back(p.size());
    }
    auto bytes = TrainDictionary(samples, sizes, 2048);
    return bytes.ok() ? CompressionDictionary::Create(bytes.value(), level).value() : nullptr;
  }();
  return dict;
}

}  // namespace granary::fuzz

#ifndef GRANARY_FUZZ_NO_MAIN

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  granary::RecordDecoder decoder(granary::fuzz::SchemaFor(selector),
                                 (selector & 0x80) ? granary::fuzz::Dictionary(3) : nullptr);
  granary::DecodedRecord record;
  granary::Status s = decoder.Decode(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), &record);
  if (s.ok()) {
    for (uint32_t i = 0; i < record.num_samples; ++i) (void)granary::SamplePayloadHash(record, i);
  }
  return 0;
}
#endif
