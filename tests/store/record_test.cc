#include "store/record.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "store/format.h"

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
    ASSERT_TRUE(encoder.Encode(Inputs(schema, fields, rows), &value, &payload_hash).ok());
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
    EXPECT_EQ(PayloadHash(rec), payload_hash);
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, RecordRoundTrip, ::testing::Values(0, 3, 19));

TEST(RecordEncoder, RejectsFieldsThatDisagreeWithTheSchema) {
  Schema schema;
  schema.fields = {{"image", DType::kUInt8, {2, 2}}};
  RecordEncoder encoder(schema, 3);
  std::string value, three(3, 'x');
  Status s = encoder.Encode({{three.data(), three.size(), {}}}, &value);
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
  ASSERT_TRUE(encoder.Encode({{image.data(), image.size(), {}}, {&label, sizeof(label), {}}}, &value).ok());
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
