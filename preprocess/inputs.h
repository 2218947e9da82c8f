// What a db was built from, and what to do when RAW is built again: a db
// `prep build` makes holds "inputs.json" (docs/FORMAT.md): its RAW, the
// options, each input file's path, size and mtime, and for sources whose
// items are files (image folders) which file became which sample. Against
// it, a build of the same RAW is up to date (nothing to do), or needs the
// changed files only (`--update`: unchanged items are copied from the old
// db instead of decoded), or was made with other options. Internal to
// preprocess.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "preprocess/build.h"
#include "preprocess/source.h"

namespace granary {

class DbReader;

inline constexpr const char* kInputsFile = "inputs.json";
// The manifest's build option holding inputs.json's hash ("xxh64:...").
inline constexpr const char* kInputsHashOption = "inputs_hash";

struct DbInputs {
  std::string raw;
  std::map<std::string, std::string> options;  // RecordedOptions of the build
  std::vector<InputFile> files;
  std::vector<std::string> class_names;
  // For sources whose items are files: each split's item names in sample order,
  std::map<std::string, std::vector<std::string>> items;
  // and the samples' payload hashes where the build recorded them (not after --resume),
  std::map<std::string, std::vector<uint64_t>> payload_hashes;
  // and, where a table labels the items (--labels), each sample's class: an
  // --update after the table is edited rewrites the samples whose class it changed.
  std::map<std::string, std::vector<int64_t>> labels;
};

// The source's input files as they are now (its own list, or the files
// directly in its path).
std::vector<InputFile> CurrentInputs(const SourceInfo& info);

// inputs.json for a finished build of `source` (rejected items left out of
// each split's items, as they are out of its samples).
std::string InputsJson(const Source& source, const BuildOptions& options, const BuildSummary& summary);

// What the manifest's kInputsHashOption holds for `inputs_json`: "xxh64:<hex>".
std::string InputsHash(const std::string& inputs_json);

// The record of the db at `db`: NotFound if it has none (made before
// December 2026, or by granary.write), Corruption if it does not parse or
// its hash is not the one the manifest holds (edited since: its mapping of
// items to samples cannot be trusted).
StatusOr<DbInputs> ReadDbInputs(const std::string& db);

// How RAW and the options differ from what the db was built from.
struct InputChanges {
  uint64_t added = 0, removed = 0, changed = 0, unchanged = 0;
  std::vector<std::string> options;  // "--size: 64 -> 32", one per option that differs
  std::vector<std::string> tables;   // "labels.csv", one per labels table whose contents changed
  bool classes_differ = false;

  bool none() const {
    return added == 0 && removed == 0 && changed == 0 && options.empty() && tables.empty() && !classes_differ;
  }
  // "input files: 3 added, 1 changed; labels table labels.csv changed", or "no input file changed".
  std::string FilesText() const;
};
InputChanges CompareInputs(const DbInputs& old, const Source& source, const BuildOptions& options);

// `source` with each item whose file is unchanged since `old` was built read
// from `old_db` (its record copied as it is where it holds the sample alone,
// decompressed only where `old` lacks the sample's payload hash; never
// decoded from RAW); the same samples, so the same records and content hash as a
// fresh build. *reused counts those items. Where the items are not files, or
// the classes moved, `source` is returned as it is.
Source ReuseUnchangedItems(Source source, const DbInputs& old, std::shared_ptr<const DbReader> old_db,
                           uint64_t* reused);

}  // namespace granary
