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
// One thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
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
};

class SampleWriter {
 public:
  // Creates "<db>.partial" (DbWriter's rules: Busy while another build of the
  // same path runs; an existing db replaced only with `overwrite`).
  // InvalidArgument for a bad schema or option.
  static StatusOr<std::unique_ptr<SampleWriter>> Create(SampleWriterOptions options);
  ~SampleWriter();
  SampleWriter(const SampleWriter&) = delete;
  SampleWriter& operator=(const SampleWriter&) = delete;

  // Splits one after another; `expected` samples (0: unknown) divides a
  // split into shards. InvalidArgument for a name already written.
  Status BeginSplit(const std::string& name, uint64_t expected = 0);
  // Appends `samples` (their fields in schema order) to the split.
  // InvalidArgument naming the split and the sample's index there when a
  // sample does not fit the schema; nothing of that call is then written
  // and the writer fails from there on.
  Status Add(std::vector<Sample> samples);
  Status EndSplit();
  // Writes the manifest and publishes the db. InvalidArgument for a label
  // field that is not in the schema.
  StatusOr<SampleWriterSummary> Finish(const SampleLabels& labels);

 private:
  struct Impl;
  explicit SampleWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
