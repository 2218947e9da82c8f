// Record values: encoding a sample's fields into the bytes stored under one
// LMDB key, and decoding them back with every check of docs/FORMAT.md.
// Encoders and decoders own a zstd context each: use one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/schema.h"
#include "store/status.h"

namespace granary {

// One field's bytes for encoding, in schema order. `shape` is needed only for
// fields whose schema shape has variable dims (and must match it otherwise).
struct FieldInput {
  const void* data = nullptr;
  size_t bytes = 0;
  Shape shape;
};

class RecordEncoder {
 public:
  // zstd_level 0 stores the payload uncompressed (codec none); 1..22 uses zstd.
  RecordEncoder(Schema schema, int zstd_level);
  ~RecordEncoder();
  RecordEncoder(const RecordEncoder&) = delete;
  RecordEncoder& operator=(const RecordEncoder&) = delete;

  // Replaces *out with the record value for `fields` (one per schema field)
  // and, if `payload_hash` is set, stores the hash of the uncompressed payload
  // there (see PayloadHash). InvalidArgument when a field's size or shape
  // disagrees with the schema.
  Status Encode(const std::vector<FieldInput>& fields, std::string* out, uint64_t* payload_hash = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A field of a decoded record; `data` points into DecodedRecord::payload.
struct FieldView {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  Shape shape;
};

// Reused between Decode calls so steady-state decoding does not allocate.
struct DecodedRecord {
  std::vector<uint8_t> payload;
  std::vector<FieldView> fields;  // in schema order
  uint64_t checksum = 0;          // the stored record checksum
};

// XXH64 of a decoded record's uncompressed payload: what content hashes are
// made of, independent of codec, level and sharding.
uint64_t PayloadHash(const DecodedRecord& record);

class RecordDecoder {
 public:
  explicit RecordDecoder(Schema schema);
  ~RecordDecoder();
  RecordDecoder(const RecordDecoder&) = delete;
  RecordDecoder& operator=(const RecordDecoder&) = delete;

  // Decodes `value` into *out. Corruption (naming the failed check) when the
  // header, field table, body or checksum is inconsistent; never reads past `value`.
  Status Decode(std::string_view value, DecodedRecord* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};


}  // namespace granary
