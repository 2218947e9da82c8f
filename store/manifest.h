// Manifest: the JSON document that describes a db (docs/FORMAT.md, "manifest.json").
// Plain values; parse and serialise are pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/schema.h"

namespace granary {

struct ShardInfo {
  std::string path;    // relative to the db directory, e.g. "train/shard-00000.mdb"
  uint64_t first = 0;  // index of the shard's first sample
  uint64_t count = 0;  // samples in the shard: first .. first + count - 1
  uint64_t bytes = 0;  // file size
};

struct SplitInfo {
  std::string name;
  uint64_t count = 0;
  std::vector<ShardInfo> shards;  // contiguous sample ranges, in order
  std::string content_hash;       // "xxh64:<16 hex digits>", see FORMAT.md
};

// Per-element statistics of a numeric feature field over a split's samples,
// as the build saw them (the manifest's "statistics"): what a model
// standardises its input with, without a pass over the db.
struct FieldStatistics {
  uint64_t samples = 0;           // the split's samples, all counted
  std::vector<uint64_t> missing;  // per element: the samples where it is NaN
  // Over the values present, per element (NaN where none is): mean,
  // population standard deviation, least and greatest value.
  std::vector<double> mean, stddev, min, max;
};

// Whether builds record FieldStatistics of a field: float32 or float64 of
// fixed shape with at most kMaxStatisticsElements elements (feature
// vectors, not images).
inline constexpr int64_t kMaxStatisticsElements = 4096;
bool HasStatistics(const FieldSpec& field);

// A raw item that did not become a record, and why.
struct RejectedItem {
  std::string split;
  std::string item;    // file, or file:line
  std::string reason;
};

struct Manifest {
  int format_version = 0;
  std::string builder;      // "granary prep 0.1.0"
  std::string created_utc;  // ISO 8601
  Schema schema;
  std::string label_field;  // the field training predicts, "" if none
  int64_t num_classes = 0;
  std::vector<std::string> class_names;
  // Field -> the name of each of its elements (a CSV table's features: its
  // columns); optional, for fields of fixed shape.
  std::map<std::string, std::vector<std::string>> element_names;
  std::string codec;  // "zstd" or "none"
  int zstd_level = 0;
  // The zstd dictionary of codec zstd-dict records; path "" if the db has none.
  std::string dictionary_path;
  uint64_t dictionary_bytes = 0;
  std::string dictionary_hash;  // "xxh64:..." of the file
  std::string source_kind;  // "idx", ...
  std::string source_path;
  std::map<std::string, std::string> build_options;
  std::vector<SplitInfo> splits;
  std::string content_hash;  // over all splits
  std::vector<RejectedItem> rejected;
  // What the build noted that is no error: files it left out and why
  // (hidden, not images, reached twice), classes with no sample, ...
  std::vector<std::string> notes;
  // Split -> field -> statistics of its HasStatistics fields; optional
  // (absent before 2026-12, and where no field has them).
  std::map<std::string, std::map<std::string, FieldStatistics>> statistics;
  // Split -> the samples of each class 0..num_classes-1 it holds, as the
  // build wrote them; optional (absent before 2026-12-07, for a label that
  // is no class, and where a label lay outside the classes).
  std::map<std::string, std::vector<uint64_t>> class_counts;

  const SplitInfo* FindSplit(const std::string& name) const;
  // Class `c`'s name, or its index where the db names none.
  std::string ClassName(int64_t c) const;
};

// "train, test": the db's split names, for a message ("none" for none).
std::string SplitNames(const Manifest& manifest);
// NotFound for a split the db at `db` lacks, naming those it has.
Status NoSuchSplit(const Manifest& manifest, const std::string& db, const std::string& split);

std::string ManifestToJson(const Manifest& manifest);
// `origin` names the file in error messages. Corruption for malformed JSON or
// fields; FailedPrecondition for a format version newer than this reader's.
StatusOr<Manifest> ParseManifest(std::string_view json, const std::string& origin);

// "xxh64:" followed by 16 lower-case hex digits.
std::string FormatHash(uint64_t hash);

// The manifest's check of the dictionary file: FormatHash of XXH64 of its bytes.
std::string DictionaryHash(const std::string& bytes);

}  // namespace granary
