// Internal to store: the layout of a shard file. Keys, the walk of a shard's
// LMDB B-tree (the one place that derives file offsets from LMDB's map), and
// the record index readers build from it. Includes lmdb.h, so it stays out of
// the public headers. Functions are thread-compatible: one walk per thread.
#pragma once

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/record.h"

namespace granary {

// LMDB's page header (MDB_page) is 16 bytes on 64-bit systems; an overflow
// value of n pages holds n * page size - kLmdbPageHeaderBytes bytes.
inline constexpr size_t kLmdbPageHeaderBytes = 16;

// Key bytes of a sample index (big-endian u64), and back.
std::string EncodeKey(uint64_t index);
uint64_t DecodeKey(const void* data);

// "<split>/shard-NNNNN.mdb".
std::string ShardRelPath(const std::string& split, int shard);

// Walks a shard's B-tree in key order, in a read transaction of its own,
// calling visit(key, value, the value's offset in the file) for each record.
// Errors name the shard file. LMDB trusts its pages, so a damaged B-tree can
// crash a walk (which is why VerifyDb walks in a child process). At each new
// leaf page the walk drops all it has mapped of the shard, so it maps a few
// folios at a time however big the shard.
Status WalkShard(MDB_env* env, const std::string& path, uint64_t file_bytes,
                 const std::function<Status(uint64_t, std::string_view, uint64_t)>& visit);

// The same walk over the shard file `file` (opened read-only here, `bytes`
// long, named `name` in messages), decoding each record with `decoder` into
// *record and calling on_record(key, decode status). Returns non-OK when the
// walk itself fails (a malformed key, or LMDB reporting damage).
Status WalkShard(const std::string& file, const std::string& name, uint64_t bytes, RecordDecoder& decoder,
                 DecodedRecord* record, const std::function<void(uint64_t, const Status&)>& on_record);

// Where each record of a shard lies in its file, read once from the B-tree.
// Random reads use it with pread instead of reading through LMDB's map: a
// page fault on a file mapping maps the page cache's whole folio around the
// page (up to 2 MiB on Linux 6.18, for files written or read in large chunks),
// so random reads through the map grew the RSS with the db's size. pread
// copies the record (a few KiB, next to decompressing it) and maps nothing.
struct ShardIndex {
  std::vector<uint64_t> first;   // keys: first sample index, ascending
  std::vector<uint64_t> offset;  // of the value in the shard file
  std::vector<uint32_t> bytes;   // of the value
  uint32_t max_bytes = 0;        // of the largest value
};

// Fills *index from a walk; Corruption if keys are out of order.
Status BuildShardIndex(MDB_env* env, const std::string& path, uint64_t file_bytes, ShardIndex* index);

}  // namespace granary
