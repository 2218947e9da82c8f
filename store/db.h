// Writing and reading granary dbs: a directory holding manifest.json and one
// LMDB file per shard of each split (docs/FORMAT.md).
//
// DbWriter: one thread at a time. A db is built under "<path>.partial" and only
// renamed to <path> by Finish(), after every shard and the manifest are synced;
// a writer destroyed without Finish() removes its partial directory (unless it
// keeps a journal for resuming), and one killed outright leaves only
// "<path>.partial", which no reader opens.
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

#include "store/manifest.h"
#include "store/record.h"
#include "store/status.h"

namespace granary {

struct DbWriterOptions {
  std::string path;
  Schema schema;
  int shards_per_split = 1;
  // Address space reserved per shard; a shard larger than this fails with
  // FailedPrecondition ("map full"). The file only grows as records arrive.
  uint64_t map_bytes = uint64_t{64} << 30;
  // A write transaction commits after this many records or bytes, whichever
  // comes first: LMDB holds a transaction's dirty pages in memory, so this
  // bounds the writer's memory whatever the db size.
  size_t records_per_commit = 8192;
  size_t bytes_per_commit = size_t{16} << 20;
  // Replace an existing db at `path` instead of refusing.
  bool overwrite = false;
};

// Where an interrupted build stopped, from the journal in "<path>.partial".
struct ResumePoint {
  bool resuming = false;
  std::vector<SplitInfo> finished;  // splits completed before the interruption
  std::string split;                // the split in progress ("" if none)
  uint64_t samples = 0;             // its samples safely written
  std::string checkpoint;           // the caller's checkpoint for exactly that state
  std::string dictionary;           // the db's dictionary, if it has one
  std::string fingerprint;          // what the caller passed to StartJournal
};

// Whether an interrupted build of the db at `path` left a journal that
// `DbWriter::Create` with a ResumePoint would continue from.
bool HasResumableBuild(const std::string& path);

class DbWriter {
 public:
  // Creates "<path>.partial" (replacing a stale one left by a killed build).
  // With `resume` set and a journal in "<path>.partial", keeps it instead and
  // fills *resume. FailedPrecondition if <path> exists and !overwrite.
  static StatusOr<std::unique_ptr<DbWriter>> Create(DbWriterOptions options, ResumePoint* resume = nullptr);

  // Makes the build resumable: from here on a journal in "<path>.partial"
  // records what is committed, together with `checkpoint()` (called after each
  // commit: it must describe the caller's state including every record
  // appended so far), and the partial directory is kept if the build does not
  // finish. When resuming, FailedPrecondition unless `fingerprint` (the
  // caller's inputs and options) matches the interrupted build's; finished
  // splits are then kept and BeginSplit of the split in progress continues it.
  Status StartJournal(const std::string& fingerprint, std::function<std::string()> checkpoint);

  ~DbWriter();
  DbWriter(const DbWriter&) = delete;
  DbWriter& operator=(const DbWriter&) = delete;

  // Stores `bytes` as the db's zstd dictionary (before any split). Records
  // encoded with it (codec zstd-dict) can only be read through it.
  Status SetDictionary(const std::string& bytes);

  // Splits are written one after another: BeginSplit, Append..., EndSplit.
  // `expected_samples` divides the split into shards of about equal size.
  Status BeginSplit(const std::string& name, uint64_t expected_samples);
  // Appends a record holding the next payload_hashes.size() samples of the
  // split (its key is the number of samples appended before it). `value` and
  // `payload_hashes` are what RecordEncoder::Encode produced.
  Status Append(std::string_view value, const std::vector<uint64_t>& payload_hashes);
  Status EndSplit();
  // Samples appended to the current split so far.
  uint64_t split_count() const;

  // Fills in the manifest's format version, schema, splits and content hash,
  // writes it, and publishes the db under its final name.
  Status Finish(Manifest manifest);

  const std::string& partial_path() const;

 private:
  Status ResumeSplit();
  struct Impl;
  explicit DbWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

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

  // Builds the split's record index now (a walk of every shard's B-tree)
  // rather than on the first Read; errors name the shard file.
  Status LoadIndex();

  // Hints the kernel that sample `index` will be read soon
  // (POSIX_FADV_WILLNEED on its record's bytes); errors are ignored, Read
  // reports them.
  void WillNeed(uint64_t index);

  size_t num_shards() const;
  // Walks shard `shard` in key order, decoding each record into *record and
  // calling on_record(key, decode status). Returns non-OK when the walk itself
  // fails (a malformed key, or LMDB reporting damage). LMDB trusts its pages:
  // a damaged file can crash this process, which is why VerifyDb runs it in a
  // child process.
  Status ScanShard(size_t shard, const std::function<void(uint64_t, const Status&)>& on_record,
                   DecodedRecord* record);

 private:
  struct Impl;
  explicit SplitReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Key bytes of a sample index (big-endian u64).
std::string EncodeKey(uint64_t index);

}  // namespace granary
