// Reading granary dbs: a directory holding manifest.json and one LMDB file
// per shard of each split (docs/FORMAT.md). store/db_writer.h writes them.
//
// DbReader: immutable after Open(); share it between threads. Each thread
// reads through its own SplitReader, which must not outlive the DbReader.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/manifest.h"
#include "store/record.h"

namespace granary {

class DbReader {
 public:
  // NotFound if `path` has no manifest.json; Corruption or FailedPrecondition
  // (newer format) from the manifest; errors naming the shard file otherwise.
  static StatusOr<std::unique_ptr<DbReader>> Open(const std::string& path);
  ~DbReader();
  DbReader(const DbReader&) = delete;
  DbReader& operator=(const DbReader&) = delete;

  const std::string& path() const;
  const Manifest& manifest() const;
  const Schema& schema() const { return manifest().schema; }
  // The db's zstd dictionary (checked against the manifest), or null.
  const std::shared_ptr<const CompressionDictionary>& dictionary() const;

 private:
  friend class SplitReader;
  struct Impl;
  explicit DbReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads samples of one split; one per thread. The first read builds the
// split's record index (shared by all readers of the DbReader): a walk of the
// shards' B-trees that keeps ~20 bytes per record. Reads then fetch a record
// with pread and map nothing, so random reads leave the RSS flat whatever the
// db's size. Keeps the last record it decoded, so neighbouring samples cost
// one decode.
class SplitReader {
 public:
  // NotFound if the db has no split `split`.
  static StatusOr<std::unique_ptr<SplitReader>> Create(const DbReader& db, const std::string& split);
  ~SplitReader();
  SplitReader(const SplitReader&) = delete;
  SplitReader& operator=(const SplitReader&) = delete;

  uint64_t size() const;  // samples
  const std::string& split() const;

  // Points *fields at sample `index`'s fields (schema order), valid until the
  // next call. Checks the record's checksum. Errors name the shard file and
  // key: "train/shard-00000.mdb, key 12: checksum mismatch". NotFound if
  // index >= size().
  Status Read(uint64_t index, const FieldView** fields);

  // The record the last successful Read came from, as stored (its bytes on
  // disk), and how many samples it holds; valid until the next Read.
  std::string_view StoredRecord() const;
  uint32_t StoredRecordSamples() const;

  // Reads the record holding sample `index` as stored, its header and
  // checksum checked but its body not decompressed: *value (valid until the
  // next read), the samples it holds and their payload bytes. For copying
  // records from one db to another. Errors as Read's.
  Status ReadStored(uint64_t index, std::string_view* value, uint32_t* samples, uint64_t* payload_bytes);

  // Builds the split's record index now (a walk of every shard's B-tree)
  // rather than on the first Read; errors name the shard file.
  Status LoadIndex();

  // Hints the kernel about samples [first, end) (clamped to the split): one
  // hint per shard they lie in, on the bytes of the records holding them.
  // kWillNeed: they will be read soon (one large read instead of one per
  // record). kWontNeed: they were read and will not be again soon (their
  // clean pages leave the page cache, for every reader of the file).
  // Errors are ignored; Read reports them.
  enum class Advice { kWillNeed, kWontNeed };
  void Advise(uint64_t first, uint64_t end, Advice advice);

  // Staging, for reading a split larger than memory a range at a time (block
  // shuffling): Stage reads the records holding samples [first, end) with
  // direct I/O, around the page cache (which they then neither fill nor
  // need dropping from), into memory shared by every SplitReader of this
  // split on this DbReader; Read and ReadStored take a staged record from
  // there (no system call, no copy). At most `max_staged_bytes` stay staged, the oldest staged leaving
  // first (a shard's part of the range larger than that is not staged);
  // Unstage drops them all. A few large reads: meant for a thread of
  // its own, while other threads Read. Records scattered over their file
  // (not a granary writer's order) are left unstaged, to be read as usual.
  // IOError where the file system has no direct I/O (tmpfs before Linux
  // 6.6); reads go on as before.
  Status Stage(uint64_t first, uint64_t end, uint64_t max_staged_bytes);
  void Unstage();

  size_t num_shards() const;

 private:
  struct Impl;
  explicit SplitReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
