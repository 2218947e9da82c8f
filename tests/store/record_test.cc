#include "store/record.h"

#include <gtest/gtest.h>

#define XXH_INLINE_ALL  // the test checksums crafted records itself
#include <xxhash.h>

#include <cstring>
#include <numeric>
#include <string>
#include <tuple>

#include "store/db.h"
#include "store/format.h"
#include "store/shard_index.h"

namespace granary {
namespace {

Schema AllDTypesSchema() {
  Schema s;
  s.fields = {{"u8", DType::kUInt8, {2, 3}},   {"i8", DType::kInt8, {4}},      {"i16", DType::kInt16, {3}},
              {"i32", DType::kInt32, {2}},     {"i64", DType::kInt64, {}},     {"f32", DType::kFloat32, {5}},
              {"f64", DType::kFloat64, {1, 2}}, {"var", DType::kFloat32, {kVariableDim, 2}}};
  return s;
}

// Field bytes with recognisable contents: field f, byte i holds f * 31 + i.
std::vector<std::string> MakeFields(const Schema& schema, int64_t var_rows) {
  std::vector<std::string> out;
  for (size_t f = 0; f < schema.fields.size(); ++f) {
    Shape shape = schema.fields[f].shape;
    if (schema.fields[f].HasVariableDims()) shape[0] = var_rows;
    std::string bytes(NumElements(shape) * DTypeBytes(schema.fields[f].dtype), '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(f * 31 + i);
    out.push_back(bytes);
  }
  return out;
}

std::vector<FieldInput> Inputs(const Schema& schema, const std::vector<std::string>& fields, int64_t var_rows) {
  std::vector<FieldInput> in;
  for (size_t f = 0; f < fields.size(); ++f) {
    FieldInput fi{fields[f].data(), fields[f].size(), {}};
    if (schema.fields[f].HasVariableDims()) fi.shape = {var_rows, 2};
    in.push_back(fi);
  }
  return in;
}

class RecordRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(RecordRoundTrip, EveryDTypeAndShapeComesBack) {
  const Schema schema = AllDTypesSchema();
  RecordEncoder encoder(schema, GetParam());
  RecordDecoder decoder(schema);
  for (int64_t rows : {0, 1, 7}) {
    auto fields = MakeFields(schema, rows);
    std::string value;
    uint64_t payload_hash = 0;
    ASSERT_TRUE(encoder.EncodeOne(Inputs(schema, fields, rows), &value, &payload_hash).ok());
    EXPECT_EQ(static_cast<uint8_t>(value[1]),
              static_cast<uint8_t>(GetParam() > 0 ? format::Codec::kZstd : format::Codec::kNone));
    DecodedRecord rec;
    Status s = decoder.Decode(value, &rec);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(rec.fields.size(), fields.size());
    for (size_t f = 0; f < fields.size(); ++f) {
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec.fields[f].data), rec.fields[f].bytes), fields[f])
          << schema.fields[f].name;
    }
    EXPECT_EQ(rec.fields.back().shape, (Shape{rows, 2}));
    EXPECT_EQ(rec.fields[0].shape, (Shape{2, 3}));
    EXPECT_EQ(SamplePayloadHash(rec, 0), payload_hash);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, RecordRoundTrip, ::testing::Values(0, 3, 19));

TEST(RecordEncoder, RejectsFieldsThatDisagreeWithTheSchema) {
  Schema schema;
  schema.fields = {{"image", DType::kUInt8, {2, 2}}};
  RecordEncoder encoder(schema, 3);
  std::string value, three(3, 'x');
  Status s = encoder.EncodeOne({{three.data(), three.size(), {}}}, &value);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'image'"), std::string::npos) << s.message();
  EXPECT_EQ(encoder.Encode({}, &value).code(), Status::Code::kInvalidArgument);
}

// Every single-byte change anywhere in a record value is caught by the decoder.
class RecordByteFlip : public ::testing::TestWithParam<int> {};

TEST_P(RecordByteFlip, EveryFlippedByteIsDetected) {
  Schema schema;
  schema.fields = {{"image", DType::kUInt8, {1, 8, 8}}, {"label", DType::kInt64, {}}};
  RecordEncoder encoder(schema, GetParam());
  RecordDecoder decoder(schema);
  std::string image(64, '\0');
  for (int i = 0; i < 64; ++i) image[i] = static_cast<char>((i * 7) % 13);
  int64_t label = 3;
  std::string value;
  ASSERT_TRUE(encoder.EncodeOne({{image.data(), image.size(), {}}, {&label, sizeof(label), {}}}, &value).ok());
  DecodedRecord rec;
  ASSERT_TRUE(decoder.Decode(value, &rec).ok());
  for (size_t pos = 0; pos < value.size(); ++pos) {
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      std::string bad = value;
      bad[pos] = static_cast<char>(bad[pos] ^ mask);
      Status s = decoder.Decode(bad, &rec);
      EXPECT_EQ(s.code(), Status::Code::kCorruption) << "byte " << pos << " mask " << int(mask);
    }
  }
  // Truncation at every length is detected too, never read past the end.
  for (size_t len = 0; len < value.size(); ++len) {
    EXPECT_EQ(decoder.Decode(std::string_view(value.data(), len), &rec).code(), Status::Code::kCorruption) << len;
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, RecordByteFlip, ::testing::Values(0, 3));

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// The worked example of docs/FORMAT.md, byte for byte.
TEST(Format, WorkedExampleFromFormatMd) {
  Schema schema;
  schema.fields = {{"image", DType::kUInt8, {1, 2, 2}}, {"label", DType::kInt64, {}}};
  RecordEncoder encoder(schema, /*zstd_level=*/0);
  const uint8_t image[4] = {1, 2, 3, 4};
  const int64_t label = 7;
  std::string value;
  uint64_t payload_hash = 0;
  ASSERT_TRUE(encoder.EncodeOne({{image, 4, {}}, {&label, 8, {}}}, &value, &payload_hash).ok());
  const std::string expected(
      "\x01\x00\x02\x00\x0c\x00\x00\x00\x01\x00\x00\x00"
      "\x37\x11\x02\xd2\xb3\xa4\xfb\xdc"
      "\x01\x02\x03\x04\x07\x00\x00\x00\x00\x00\x00\x00",
      32);
  EXPECT_EQ(value, expected);
  EXPECT_EQ(payload_hash, 0x440e73a322a30d18ULL);
  EXPECT_EQ(EncodeKey(5), std::string("\0\0\0\0\0\0\0\x05", 8));
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// Small, similar records: what dictionaries are for.
std::vector<std::string> SimilarPayloads(int count, size_t bytes) {
  std::vector<std::string> out;
  uint32_t x = 12345;
  for (int i = 0; i < count; ++i) {
    std::string p(bytes, '\0');
    for (size_t k = 0; k < bytes; ++k) {
      x = x * 1103515245 + 12345;
      p[k] = static_cast<char>((k % 16 < 8) ? (k * 3) & 0xFF : (x >> 24) & 0x0F);
    }
    out.push_back(p);
  }
  return out;
}

std::shared_ptr<const CompressionDictionary> TrainedDictionary(const std::vector<std::string>& payloads, int level) {
  std::string samples;
  std::vector<size_t> sizes;
  for (const auto& p : payloads) {
    samples += p;
    sizes.push_back(p.size());
  }
  auto bytes = TrainDictionary(samples, sizes, 4096);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto dict = CompressionDictionary::Create(bytes.value(), level);
  EXPECT_TRUE(dict.ok());
  return dict.value();
}

// A record of one variable-length uint8 field, crafted: its header says
// `payload_bytes` (and the field's one dim the same), then `body`, under a
// correct checksum, so only the decoder's limits stand in the way.
std::string CraftedRecord(uint32_t payload_bytes, const std::string& body) {
  std::string header(format::kFixedHeaderBytes + format::kDimBytes, '\0');
  header[0] = static_cast<char>(format::kRecordVersion);
  header[1] = static_cast<char>(format::Codec::kZstd);
  header[2] = 1;  // fields
  for (int i = 0; i < 4; ++i) {
    header[4 + i] = static_cast<char>(payload_bytes >> (8 * i));
    header[12 + i] = static_cast<char>(payload_bytes >> (8 * i));  // the dim
  }
  header[8] = 1;  // samples
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, format::kChecksumSeed);
  XXH64_update(state, header.data(), header.size());
  XXH64_update(state, body.data(), body.size());
  const uint64_t checksum = XXH64_digest(state);
  XXH64_freeState(state);
  for (int i = 0; i < 8; ++i) header.push_back(static_cast<char>(checksum >> (8 * i)));
  return header + body;
}

// A zstd frame (or a header) claiming gigabytes is refused before the payload
// is allocated: by the 1 GiB record limit, by what a frame of that size can
// hold at most (32768 times its bytes), or by the frame's own content size.
// A legitimately extreme ratio (4 MiB of zeros) still reads.
TEST(RecordDecoder, AFrameClaimingGigabytesIsRefusedBeforeAllocating) {
  Schema schema;
  schema.fields = {{"v", DType::kUInt8, {kVariableDim}}};
  RecordEncoder encoder(schema, 3);
  RecordDecoder decoder(schema);
  DecodedRecord record;
  for (size_t bytes : {size_t{100}, size_t{4} << 20}) {
    const std::string zeros(bytes, '\0');
    std::string value;
    ASSERT_TRUE(encoder.EncodeOne({{zeros.data(), zeros.size(), {static_cast<int64_t>(bytes)}}}, &value).ok());
    ASSERT_TRUE(decoder.Decode(value, &record).ok()) << bytes;
    EXPECT_EQ(record.fields[0].bytes, bytes);
  }
  std::string value;
  ASSERT_TRUE(encoder.EncodeOne({{"0123456789", 10, {10}}}, &value).ok());
  const std::string frame = value.substr(format::kFixedHeaderBytes + format::kDimBytes + format::kChecksumBytes);
  ASSERT_TRUE(decoder.Decode(CraftedRecord(10, frame), &record).ok());  // the crafting is right

  // 13 bytes declaring 1 GiB of content: magic, a single-segment header with
  // a 4-byte content size, one last RLE block of 128 KiB.
  const std::string gigabyte_frame("\x28\xb5\x2f\xfd\xa0\x00\x00\x00\x40\x03\x00\x10\x00", 13);
  const std::tuple<uint32_t, std::string, const char*> cases[] = {
      {0xFFFFFFFFu, frame, "exceeds the 1 GiB limit"},
      {uint32_t{1} << 30, gigabyte_frame, "a zstd frame of 13 bytes cannot hold the 1073741824 bytes"},
      {100000, frame, "zstd frame header does not declare 100000 bytes"},
  };
  for (const auto& [claimed, body, message] : cases) {
    Status s = decoder.Decode(CraftedRecord(claimed, body), &record);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << claimed;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
  }
}

TEST(RecordDictionary, RoundTripsSmallerAndEveryFlipIsDetected) {
  Schema schema;
  schema.fields = {{"x", DType::kUInt8, {256}}};
  auto payloads = SimilarPayloads(2000, 256);
  auto dict = TrainedDictionary(payloads, 3);
  RecordEncoder plain(schema, 3), with_dict(schema, 3, dict);
  RecordDecoder decoder(schema, dict), no_dict_decoder(schema);
  size_t plain_bytes = 0, dict_bytes = 0;
  std::string a, b;
  DecodedRecord rec;
  for (int i = 0; i < 50; ++i) {
    const std::string& p = payloads[i];
    ASSERT_TRUE(plain.EncodeOne({{p.data(), p.size(), {}}}, &a).ok());
    ASSERT_TRUE(with_dict.EncodeOne({{p.data(), p.size(), {}}}, &b).ok());
    EXPECT_EQ(b[1], static_cast<char>(format::Codec::kZstdDict));
    plain_bytes += a.size();
    dict_bytes += b.size();
    ASSERT_TRUE(decoder.Decode(b, &rec).ok());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec.fields[0].data), rec.fields[0].bytes), p);
    ASSERT_TRUE(decoder.Decode(a, &rec).ok());  // a dictionary reader reads plain zstd too
  }
  EXPECT_LT(dict_bytes, plain_bytes);
  Status s = no_dict_decoder.Decode(b, &rec);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("dictionary"), std::string::npos);
  for (size_t pos = 0; pos < b.size(); ++pos) {
    std::string bad = b;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    EXPECT_EQ(decoder.Decode(bad, &rec).code(), Status::Code::kCorruption) << pos;
  }
}

TEST(RecordDictionary, TrainingOnTooLittleDataIsAnError) {
  auto bytes = TrainDictionary("abc", {3}, 4096);
  EXPECT_EQ(bytes.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// A record of several samples with variable shapes comes back sample by sample.
TEST(RecordBlock, SeveralSamplesRoundTripWithTheirOwnShapes) {
  Schema schema;
  schema.fields = {{"tokens", DType::kInt32, {kVariableDim}}, {"label", DType::kInt64, {}}};
  for (int level : {0, 5}) {
    RecordEncoder encoder(schema, level);
    RecordDecoder decoder(schema);
    std::vector<std::vector<int32_t>> tokens = {{1, 2, 3}, {}, {7}, {9, 9, 9, 9, 9}};
    std::vector<int64_t> labels = {4, 5, 6, 7};
    std::vector<SampleInput> samples;
    for (size_t s = 0; s < tokens.size(); ++s) {
      samples.push_back({{tokens[s].data(), tokens[s].size() * 4, {static_cast<int64_t>(tokens[s].size())}},
                         {&labels[s], 8, {}}});
    }
    std::string value;
    std::vector<uint64_t> hashes;
    ASSERT_TRUE(encoder.Encode(samples, &value, &hashes).ok());
    ASSERT_EQ(hashes.size(), 4u);
    DecodedRecord rec;
    ASSERT_TRUE(decoder.Decode(value, &rec).ok());
    ASSERT_EQ(rec.num_samples, 4u);
    for (size_t s = 0; s < tokens.size(); ++s) {
      const FieldView* f = rec.sample(s);
      EXPECT_EQ(f[0].shape, (Shape{static_cast<int64_t>(tokens[s].size())}));
      ASSERT_EQ(f[0].bytes, tokens[s].size() * 4);
      if (f[0].bytes > 0) {  // an empty vector's data() may be null
        EXPECT_EQ(std::memcmp(f[0].data, tokens[s].data(), f[0].bytes), 0);
      }
      int64_t label;
      std::memcpy(&label, f[1].data, 8);
      EXPECT_EQ(label, labels[s]);
      EXPECT_EQ(SamplePayloadHash(rec, s), hashes[s]);
      // A sample's content hash does not depend on its neighbours.
      std::string alone;
      uint64_t alone_hash;
      ASSERT_TRUE(encoder.EncodeOne(samples[s], &alone, &alone_hash).ok());
      EXPECT_EQ(alone_hash, hashes[s]);
    }
    for (size_t pos = 0; pos < value.size(); ++pos) {
      std::string bad = value;
      bad[pos] = static_cast<char>(bad[pos] ^ 0x04);
      EXPECT_EQ(decoder.Decode(bad, &rec).code(), Status::Code::kCorruption) << pos;
    }
  }
}

}  // namespace
}  // namespace granary
