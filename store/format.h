// The constants of granary's on-disk format. docs/FORMAT.md is the spec; every
// number here is defined there, and a change here is a change of format version.
#pragma once

#include <cstddef>
#include <cstdint>

namespace granary::format {

// manifest.json: "format" must equal kFormatName; "format_version" is at most
// kFormatVersion for a reader to accept the db.
inline constexpr char kFormatName[] = "granary-db";
inline constexpr int kFormatVersion = 1;
inline constexpr char kManifestFile[] = "manifest.json";
// Readers refuse a larger manifest before reading it (and, in any JSON
// document, nesting deeper than 64 levels: base/json_text.h).
inline constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
// A db being built lives under "<db>" + kPartialSuffix until it is complete.
inline constexpr char kPartialSuffix[] = ".partial";
// In "<db>.partial" while a build holds it: the builder's process id. It marks
// the directory as a build's (so a stale one may be removed) and names the
// builder to a second build that finds the directory locked.
inline constexpr char kBuilderFile[] = "builder.pid";

// LMDB keys: the index (within its split) of the first sample a record holds,
// unsigned 64-bit big-endian, so keys sort in index order and writes can use
// MDB_APPEND.
inline constexpr size_t kKeyBytes = 8;

// Record value: a fixed header, a field table, a checksum, then the body.
inline constexpr uint8_t kRecordVersion = 1;
enum class Codec : uint8_t {
  kNone = 0,      // body is the payload itself
  kZstd = 1,      // body is one zstd frame
  kZstdDict = 2,  // body is one zstd frame without magic number or dictionary id,
                  // made with the db's dictionary
};

struct RecordFixedHeader {
  uint8_t record_version;
  uint8_t codec;
  uint16_t field_count;    // little-endian
  uint32_t payload_bytes;  // little-endian, uncompressed, all samples
  uint32_t sample_count;   // little-endian, >= 1: samples key .. key + sample_count - 1
};
static_assert(sizeof(RecordFixedHeader) == 12, "fixed record header is 12 bytes");
inline constexpr size_t kFixedHeaderBytes = sizeof(RecordFixedHeader);
// Limits readers enforce before allocating: samples per record, payload bytes.
inline constexpr uint32_t kMaxRecordSamples = 65536;
inline constexpr uint32_t kMaxPayloadBytes = uint32_t{1} << 30;
inline constexpr size_t kDimBytes = 4;       // u32 per dim of a variable-shape field
inline constexpr size_t kChecksumBytes = 8;     // XXH64, seed kChecksumSeed
inline constexpr uint64_t kChecksumSeed = 0;

// Shard files: "<split>/shard-NNNNN.mdb" (LMDB with MDB_NOSUBDIR). Each shard
// holds a contiguous range of the split's samples (manifest: "first", "count").
inline constexpr int kShardDigits = 5;

// The db's zstd dictionary, if it has one, relative to the db directory.
inline constexpr char kDictionaryFile[] = "zstd.dict";

}  // namespace granary::format
