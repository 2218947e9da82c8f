// SampleWriter: a db from samples handed over in order (granary.write, from
// Python), where BuildDb pulls them from a Source by index. The same records
// as `prep build` makes of the same samples: each sample encoded alone, then
// packed into blocks (preprocess/packing.h) and written by the store's
// DbWriter, so checksums, shards, manifest and content hash follow
// docs/FORMAT.md as prep's do. Samples are encoded and compressed in parallel
// on a oneTBB arena of `threads`; Add returns once its samples are written.
//
// Streaming: a split's length need not be known, and only the samples of one
// Add call (and, before the first record, the first `dictionary_samples` of
// the first split, for the dictionary) are in memory at once.
//
// Publication is DbWriter's: the db is built in "<db>.partial" and renamed at
// Finish; a writer destroyed (or a process killed) before Finish leaves no db.
// Resumable as prep's builds are: once the dictionary is decided, a journal in
// "<db>.partial" records the committed samples with the writer's state, and
// a writer created with `resume` continues from there (resumed() says where;
// the caller hands over the samples that follow, in the same order), making
// the same db as an uninterrupted write. One thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "preprocess/build.h"
#include "preprocess/source.h"
#include "store/schema.h"

namespace granary {

struct SampleWriterOptions {
  std::string db_path;
  Schema schema;
  int threads = 0;  // 0: all cores
  int zstd_level = 3;
  DictionaryMode dictionary = DictionaryMode::kAuto;
  size_t dictionary_samples = 8192;  // the first samples of the first split train it
  size_t block_bytes = 0;            // 0: two LMDB pages, as prep
  bool overwrite = false;
  // What the manifest says of where the samples came from.
  std::string builder = "granary python";  // the version is added
  std::string source_kind = "python";
  std::string source_path;                    // what the samples came from, as the caller names it
  std::map<std::string, std::string> options;  // recorded in the manifest's build options
  // Continue the interrupted write in "<db>.partial", if it left a journal
  // and was given the same `fingerprint` (the caller's description of its
  // samples) and options; without a journal, start afresh.
  bool resume = false;
  std::string fingerprint;
  size_t records_per_commit = 0;  // and so per journal update; 0: the store's default
  // Every split's samples together, where the caller knows them (0: not
  // known): what DbWriterOptions::expected_samples projects the disk's room by.
  uint64_t expected_samples = 0;
};

// Where a resumed write continues: splits finished (name, samples), the
// split in progress with its samples already written, and the caller's state
// as SetCallerState last gave it.
struct SampleWriterResume {
  bool resuming = false;
  std::vector<std::pair<std::string, uint64_t>> finished;
  std::string split;  // "" if none was in progress
  uint64_t samples = 0;
  std::string caller_state;
};

// What the manifest says of the data, known once every sample was seen.
struct SampleLabels {
  std::string label_field;  // "" if none
  int64_t num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<std::string> notes;
};

struct SampleWriterSummary {
  std::vector<SplitSummary> splits;
  uint64_t payload_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t dictionary_bytes = 0;
  std::string dictionary_note;
  std::string content_hash;
  double seconds = 0;
  int threads = 0;
  // A class one split holds and another lacks (ClassGapNotes), in the
  // manifest's notes too; the caller says the rest of what it saw.
  std::vector<std::string> notes;
};

class SampleWriter {
 public:
  // Creates "<db>.partial" (DbWriter's rules: Busy while another build of the
  // same path runs; an existing db replaced only with `overwrite`), or with
  // `resume` continues the one there. InvalidArgument for a bad schema or
  // option; FailedPrecondition naming what differs from the interrupted
  // write (whose partial directory is then kept).
  static StatusOr<std::unique_ptr<SampleWriter>> Create(SampleWriterOptions options);
  ~SampleWriter();
  SampleWriter(const SampleWriter&) = delete;
  SampleWriter& operator=(const SampleWriter&) = delete;

  const SampleWriterResume& resumed() const;
  // What the caller needs to continue (e.g. its largest label so far), kept
  // in the journal with every commit; it should cover at least the samples
  // handed over so far.
  void SetCallerState(std::string state);

  // Splits one after another; `expected` samples (0: unknown) divides a
  // split into shards. InvalidArgument for a name already written. Beginning
  // the split a resumed write left in progress continues it: Add then takes
  // its samples from resumed().samples on.
  Status BeginSplit(const std::string& name, uint64_t expected = 0);
  // Appends `samples` (their fields in schema order) to the split.
  // InvalidArgument naming the split and the sample's index there when a
  // sample does not fit the schema; nothing of that call is then written
  // and the writer fails from there on.
  Status Add(std::vector<Sample> samples);
  Status EndSplit();
  // DbWriter::TakeDiskWarning: once, that the rest will not fit on the disk.
  std::string TakeDiskWarning();
  // Writes the manifest and publishes the db. InvalidArgument for a label
  // field that is not in the schema.
  StatusOr<SampleWriterSummary> Finish(const SampleLabels& labels);

 private:
  struct Impl;
  explicit SampleWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
