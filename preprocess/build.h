// BuildDb: turns a Source into a db through a bounded, ordered oneTBB flow graph
//   input -> limiter -> produce+encode (parallel) -> sequencer -> pack (serial)
//     -> encode blocks (parallel) -> sequencer -> writer (serial)
// with the writer releasing the limiter, so at most `max_in_flight` items are
// alive whatever the dataset size. Output is identical for any thread count.
// One BuildDb at a time per process (it sets oneTBB's global parallelism).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "preprocess/field_statistics.h"
#include "preprocess/source.h"
#include "preprocess/value_counts.h"
#include "store/manifest.h"

namespace granary {

enum class OnError { kSkip, kFail };

// How a build that failed --max-rejects says so, and how it says that every
// item it read was rejected (prep's advice tells these failures apart).
inline constexpr char kMoreThanMaxRejects[] = "more than --max-rejects";
inline constexpr char kEveryItemRejected[] = "every item read was rejected";

// kAuto trains a zstd dictionary when records are small (where it pays) and
// uses none if training fails; kOn fails the build instead.
enum class DictionaryMode { kAuto, kOn, kOff };
const char* DictionaryModeName(DictionaryMode mode);  // "auto", "on", "off"

struct BuildOptions {
  std::string db_path;
  int threads = 0;  // 0: all cores
  int shards = 1;
  // The largest a shard file may grow (MiB); a split that needs more per shard
  // fails, and --resume with a larger limit or none continues it. 0: no limit.
  uint64_t max_shard_mb = 0;
  int zstd_level = 3;
  DictionaryMode dictionary = DictionaryMode::kAuto;
  size_t dictionary_max_bytes = 64 << 10;
  size_t dictionary_samples = 8192;  // evenly spaced items of the first split
  size_t max_in_flight = 0;  // 0: 64 per thread (at least two blocks' worth)
  // Consecutive samples are packed into one record while it is expected to
  // stay within this many bytes; 0: two LMDB pages (an overflow record that
  // fills its pages). Samples larger than this get a record each.
  size_t block_bytes = 0;
  bool overwrite = false;
  OnError on_error = OnError::kSkip;
  // The build fails if more than this fraction of a split's items is rejected
  // (as soon as that many are: "<n> of <total> items rejected", or
  // kEveryItemRejected where no item read was taken).
  double max_reject_fraction = 0.01;
  bool show_progress = false;  // a progress line on stderr
  // Set (e.g. by a signal handler) to stop the build; it then fails and leaves
  // no db, only "<db>.partial", which `resume` can continue.
  const std::atomic<bool>* cancel = nullptr;
  // Continue the interrupted build in "<db>.partial" (same source and options)
  // instead of starting over; without one, start over. The result has the
  // same content hash as an uninterrupted build.
  bool resume = false;
  // Records per write transaction (and so per journal update); 0: the store's default.
  size_t records_per_commit = 0;
  // Told, as the build goes on, what it should know before the build ends
  // (the db will not fit on its disk); the summary's `warnings` keep it.
  std::function<void(const std::string&)> on_warning;
};

// What the manifest records as the options a db was built with: how the
// source was read (source.info.options) and how its records were encoded.
std::map<std::string, std::string> RecordedOptions(const Source& source, const BuildOptions& options);

struct SplitSummary {
  std::string name;
  uint64_t read = 0;
  uint64_t written = 0;
  uint64_t rejected = 0;
  StatisticsAccumulator statistics;  // of the written samples' feature fields
  ValueCounter counts;               // and of their labels' values
  // The written samples' payload hashes in order, kept where the source's
  // items are files (inputs.json records them for --update); not journaled,
  // so a resumed split has fewer than `written`.
  std::vector<uint64_t> payload_hashes;
};

// The splits' statistics, where they have any, into manifest->statistics,
// and the samples of each class, where the label is one of
// manifest->num_classes classes, into manifest->class_counts.
void RecordStatistics(const std::vector<SplitSummary>& splits, Manifest* manifest);

// A split's summary in a build journal's checkpoint (all but payload_hashes),
// and back: Corruption for a checkpoint that is not one.
nlohmann::json SplitSummaryToJson(const SplitSummary& s);
StatusOr<SplitSummary> SplitSummaryFromJson(const nlohmann::json& j, const Schema& schema);

struct BuildSummary {
  std::vector<SplitSummary> splits;
  std::vector<RejectedItem> rejected;
  uint64_t raw_bytes = 0;      // input files
  uint64_t payload_bytes = 0;  // decoded sample bytes
  uint64_t stored_bytes = 0;   // every file of the db
  double seconds = 0;
  int threads = 0;
  uint64_t dictionary_bytes = 0;  // 0: none
  std::string dictionary_note;    // why there is none, or what it was trained on
  std::string content_hash;
  std::vector<std::string> notes;  // what producing the items found (Source::produced_notes)
  std::vector<std::string> warnings;  // as BuildOptions::on_warning was told them
};

// The time now as a manifest's created_utc: "2026-12-04T18:00:00Z".
std::string NowUtc();

// The content hash of the finished db at `path` (read back, as any reader
// would) and the bytes of all its files.
Status MeasureDb(const std::string& path, std::string* content_hash, uint64_t* stored_bytes);

// On failure nothing is left at options.db_path; "<db>.partial" stays behind
// for `resume` once records were being written (it is never a db).
StatusOr<BuildSummary> BuildDb(const Source& source, const BuildOptions& options);

}  // namespace granary
