// Writing granary dbs (docs/FORMAT.md); store/db.h reads them.
//
// DbWriter: one thread at a time. A db is built under "<path>.partial" and only
// renamed to <path> by Finish(), after every shard and the manifest are synced.
// The writer holds an exclusive lock (flock) on "<path>.partial" for its whole
// life, so a second build of the same path fails at once (Busy, naming the
// process that holds it) instead of writing into the first one's files. A
// writer destroyed without Finish() removes its partial directory (unless it
// keeps a journal for resuming); one killed outright leaves only
// "<path>.partial", which no reader opens, and whose lock dies with it.
//
// What a writer deletes: only what it made. An existing "<path>.partial" is
// replaced only if a build made it (it holds builder.pid or a journal, or is
// empty); an existing <path> only with `overwrite` and only if it is a granary
// db (its manifest says so); never a path that is or contains an input.
#pragma once

#include <cstddef>
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

struct DbWriterOptions {
  std::string path;
  Schema schema;
  int shards_per_split = 1;
  // LMDB maps a shard's file into address space of a fixed size (its map).
  // A shard starts with a map of `initial_map_bytes` and the writer doubles it
  // (committing first) whenever the next record might not fit, so a shard
  // grows as far as the disk and the address space allow. With
  // `max_shard_bytes` > 0 the map never grows past it, and a shard that would
  // need more fails the build (FailedPrecondition naming the shard). A map
  // the system refuses (ulimit -v) is an IOError saying so.
  uint64_t initial_map_bytes = uint64_t{256} << 20;
  uint64_t max_shard_bytes = 0;
  // A write transaction commits after this many records or bytes, whichever
  // comes first: LMDB holds a transaction's dirty pages in memory, so this
  // bounds the writer's memory whatever the db size. Small enough that those
  // pages stay in the CPU's caches and, freed at the commit, are reused by
  // the next transaction (16 MB made an --update 1.2x slower; 1-4 MB were
  // alike: docs/BENCHMARKS.md).
  size_t records_per_commit = 8192;
  size_t bytes_per_commit = size_t{4} << 20;
  // Replace an existing granary db at `path` instead of refusing.
  bool overwrite = false;
  // Files or folders the build reads: InvalidArgument if `path` (or its
  // partial directory) is one of them or contains one.
  std::vector<std::string> inputs;
  // Who builds, and what continues this build if it is interrupted, as
  // messages name them (kept in the journal: a reader that finds only
  // "<path>.partial", or another kind of build resuming it, tells the user).
  std::string builder = "prep build";
  std::string resume_with = "prep build --resume";
  // Every split's samples together, where the caller knows them ahead (0: not
  // known). With it the writer projects, from a hundredth of them (at least
  // 1,000 samples) on, what the rest will take at the bytes a sample so far,
  // and TakeDiskWarning() says so once where that is more than the disk has
  // free: a build that will fill its disk hours on is told in its first
  // minutes.
  uint64_t expected_samples = 0;
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
  std::string builder;              // the interrupted build's DbWriterOptions::builder
  std::string resume_with;          // and its resume_with
};

// Whether an interrupted build of the db at `path` left a journal that
// `DbWriter::Create` with a ResumePoint would continue from.
bool HasResumableBuild(const std::string& path);

// Whether `path` is a directory whose manifest.json names granary's format
// (however damaged the rest): what `overwrite` may replace.
bool IsGranaryDb(const std::string& path);

// LMDB's page maths (store/lmdb_pages.cc). Bytes of a record value that
// exactly fills `pages` LMDB pages as an overflow value (the page header
// takes the rest).
size_t ValueBytesFillingPages(size_t pages);

// Shard bytes a record value of `value_bytes` takes: LMDB gives a value over
// about half a page whole overflow pages of its own; smaller ones share leaf
// pages, with a node header each. What packing and a dictionary are judged by.
uint64_t StoredBytesOfValue(size_t value_bytes);

class DbWriter {
 public:
  // Creates and locks "<path>.partial" (replacing a stale one a killed build
  // left). With `resume` set and a journal in "<path>.partial", keeps it
  // instead and fills *resume. FailedPrecondition if <path> exists and is not
  // replaceable (see above); Busy if another process is building <path>.
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

  // Writes a file of the caller's into the db (synced; published with it):
  // `name` a plain file name that is none of the db's own files.
  Status AddFile(const std::string& name, const std::string& bytes);

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
  // A warning, once, that the rest of the expected samples will not fit on the
  // db's disk (DbWriterOptions::expected_samples); "" until then, and after.
  std::string TakeDiskWarning();

  // Fills in the manifest's format version, schema, splits and content hash,
  // writes it, and publishes the db under its final name (atomically
  // exchanging it with the db it replaces, which is then removed).
  Status Finish(Manifest manifest);

  const std::string& partial_path() const;

 private:
  Status ResumeSplit();
  struct Impl;
  explicit DbWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
