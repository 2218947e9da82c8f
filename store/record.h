// Record values: encoding samples' fields into the bytes stored under one
// LMDB key, and decoding them back with every check of docs/FORMAT.md.
// Encoders and decoders own a zstd context each: use one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/schema.h"

namespace granary {

// One field's bytes for encoding, in schema order. `shape` is needed only for
// fields whose schema shape has variable dims (and must match it otherwise).
struct FieldInput {
  const void* data = nullptr;
  size_t bytes = 0;
  Shape shape;
};

// One sample: its fields in schema order.
using SampleInput = std::vector<FieldInput>;

class CompressionDictionary;

// A record value holds one or more consecutive samples of a split, compressed
// together (docs/FORMAT.md, "Record values").
class RecordEncoder {
 public:
  // zstd_level 0 stores the payload uncompressed (codec none); 1..22 uses zstd,
  // with `dictionary` (codec zstd-dict) if one is given; it must have been
  // created for compression.
  RecordEncoder(Schema schema, int zstd_level, std::shared_ptr<const CompressionDictionary> dictionary = nullptr);
  ~RecordEncoder();
  RecordEncoder(const RecordEncoder&) = delete;
  RecordEncoder& operator=(const RecordEncoder&) = delete;

  // Replaces *out with the record value holding `samples` (at least one) and,
  // if `payload_hashes` is set, stores each sample's content hash there (see
  // SamplePayloadHash). InvalidArgument when a field's size or shape disagrees
  // with the schema.
  Status Encode(const std::vector<SampleInput>& samples, std::string* out,
                std::vector<uint64_t>* payload_hashes = nullptr);
  // The same for a single sample.
  Status EncodeOne(const SampleInput& sample, std::string* out, uint64_t* payload_hash = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A field of a decoded sample; `data` points into DecodedRecord::payload.
struct FieldView {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  Shape shape;
};

// A decoded record value. Reused between Decode calls so steady-state decoding
// does not allocate.
struct DecodedRecord {
  uint32_t num_samples = 0;
  size_t num_fields = 0;
  std::vector<uint8_t> payload;
  std::vector<FieldView> fields;  // num_samples x num_fields, sample-major (and unused spares after them)
  uint64_t checksum = 0;          // the stored record checksum

  // The fields of sample `s` (< num_samples), in schema order.
  const FieldView* sample(size_t s) const { return fields.data() + s * num_fields; }
};

class RecordDecoder {
 public:
  // `dictionary` is the db's, needed for records of codec zstd-dict.
  explicit RecordDecoder(Schema schema, std::shared_ptr<const CompressionDictionary> dictionary = nullptr);
  ~RecordDecoder();
  RecordDecoder(const RecordDecoder&) = delete;
  RecordDecoder& operator=(const RecordDecoder&) = delete;

  // Decodes `value` into *out. Corruption (naming the failed check) when the
  // header, dim table, body or checksum is inconsistent; never reads past `value`.
  Status Decode(std::string_view value, DecodedRecord* out);

  // Checks `value`'s header and checksum as Decode does, without
  // decompressing its body: how many samples it holds and their payload
  // bytes (for copying a record as it is stored).
  Status Check(std::string_view value, uint32_t* samples, uint64_t* payload_bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Bytes a record of `samples` samples spends on its header and checksum.
size_t RecordOverheadBytes(const Schema& schema, size_t samples);

// A db's zstd dictionary (docs/FORMAT.md, "Dictionary"). Immutable; share it
// between threads and encoders/decoders.
class CompressionDictionary {
 public:
  // `compression_level` > 0 also prepares it for compressing at that level.
  // InvalidArgument if zstd rejects the bytes.
  static StatusOr<std::shared_ptr<const CompressionDictionary>> Create(std::string bytes, int compression_level);
  ~CompressionDictionary();
  CompressionDictionary(const CompressionDictionary&) = delete;
  CompressionDictionary& operator=(const CompressionDictionary&) = delete;

  const std::string& bytes() const;

 private:
  friend class RecordEncoder;
  friend class RecordDecoder;
  struct Impl;
  CompressionDictionary();
  std::unique_ptr<Impl> impl_;
};

// Trains a zstd dictionary of at most `max_bytes` from samples laid end to end
// in `samples` with sizes `sample_bytes`. Deterministic. InvalidArgument (with
// zstd's reason) when the samples are too few or too small to train on.
StatusOr<std::string> TrainDictionary(const std::string& samples, const std::vector<size_t>& sample_bytes,
                                      size_t max_bytes);

// XXH64 of sample `s`'s uncompressed bytes (its fields in order): what content
// hashes are made of, independent of codec, level, blocking and sharding.
uint64_t SamplePayloadHash(const DecodedRecord& record, size_t s);
// The same of a decoded sample's `num_fields` fields (SplitReader::Read's).
uint64_t SamplePayloadHash(const FieldView* fields, size_t num_fields);
// The same of a sample's fields (schema order) held apart.
uint64_t SamplePayloadHash(const std::vector<std::string>& fields);

}  // namespace granary
