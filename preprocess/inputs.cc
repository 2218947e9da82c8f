#include "preprocess/inputs.h"

#include <sys/stat.h>
#include <tbb/enumerable_thread_specific.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/json_text.h"
#include "preprocess/packing.h"
#include "store/db.h"
#include "store/manifest.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// Whether the build option `key` is a labels table's content hash (labels_hash of --labels, or
// <split>_labels_hash of a split's own table).
constexpr std::string_view kLabelsHash = "labels_hash", kSplitLabelsHash = "_labels_hash";

bool IsLabelsHash(const std::string& key) {
  return key.size() >= kLabelsHash.size() && key.compare(key.size() - kLabelsHash.size(), kLabelsHash.size(),
                                                          kLabelsHash) == 0;
}

// Whether a table labels the items of a build with these options.
bool LabelledByTable(const std::map<std::string, std::string>& options) {
  return std::any_of(options.begin(), options.end(), [](const auto& o) { return IsLabelsHash(o.first); });
}

InputFile Stat(const fs::path& path, const std::string& name) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {name, 0, -1};
  return {name, static_cast<uint64_t>(st.st_size), int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

// A split whose unchanged items come from the old db: item k is sample
// old_index[k] of the old db's split of the same name, or (-1) produced by
// the source as before.
class ReusingSplit : public SplitSource {
 public:
  // old_hashes: each old sample's payload hash (from inputs.json), or none.
  ReusingSplit(std::unique_ptr<SplitSource> inner, std::shared_ptr<const DbReader> old_db, std::vector<int64_t> old_index,
               std::vector<uint64_t> old_hashes)
      : inner_(std::move(inner)),
        old_db_(std::move(old_db)),
        old_index_(std::move(old_index)),
        old_hashes_(std::move(old_hashes)) {}

  const std::string& name() const override { return inner_->name(); }
  uint64_t size() const override { return inner_->size(); }
  std::string ItemName(uint64_t index) const override { return inner_->ItemName(index); }
  int64_t ItemLabel(uint64_t index) const override { return inner_->ItemLabel(index); }
  uint64_t raw_bytes() const override { return inner_->raw_bytes(); }

  Status Produce(uint64_t index, Sample* sample) const override {
    if (old_index_[index] >= 0 && CopyOld(static_cast<uint64_t>(old_index_[index]), sample)) return Status::OK();
    return inner_->Produce(index, sample);
  }

  // The old record as it is where it holds the sample alone and the old db
  // has no dictionary: what this build (no dictionary, the same options:
  // codec and level) would make of the sample again.
  Status ProduceStored(uint64_t index, Sample* sample) const override {
    const int64_t old = old_index_[index];
    if (old >= 0 && old_db_->manifest().dictionary_path.empty() && CopyStored(static_cast<uint64_t>(old), sample)) {
      return Status::OK();
    }
    return Produce(index, sample);
  }

 private:
  // This thread's reader of the old split; null if it cannot be made.
  SplitReader* Reader() const {
    std::unique_ptr<SplitReader>& reader = readers_.local();
    if (reader == nullptr) {
      StatusOr<std::unique_ptr<SplitReader>> r = SplitReader::Create(*old_db_, inner_->name());
      if (r.ok()) reader = std::move(r).value();
    }
    return reader.get();
  }

  // The old sample's fields; false (decode it instead) if the old db fails to give it.
  bool CopyOld(uint64_t old, Sample* sample) const {
    SplitReader* reader = Reader();
    if (reader == nullptr) return false;
    const FieldView* fields = nullptr;
    if (!reader->Read(old, &fields).ok()) return false;
    CopyDecodedFields(fields, old_db_->schema().fields.size(), sample);
    return true;
  }

  // The old sample as its record (Sample::fields_in_record), where that
  // record holds it alone; false (CopyOld instead) otherwise. With the
  // sample's payload hash from inputs.json the record is not decompressed;
  // without it (a db built with --resume), it is, for the hash.
  bool CopyStored(uint64_t old, Sample* sample) const {
    SplitReader* reader = Reader();
    if (reader == nullptr) return false;
    std::string_view value;
    uint32_t samples = 0;
    uint64_t payload_bytes = 0, hash = 0;
    if (old < old_hashes_.size()) {
      if (!reader->ReadStored(old, &value, &samples, &payload_bytes).ok()) return false;
      hash = old_hashes_[old];
    } else {
      const FieldView* fields = nullptr;
      if (!reader->Read(old, &fields).ok()) return false;
      value = reader->StoredRecord();
      samples = reader->StoredRecordSamples();
      const size_t n = old_db_->schema().fields.size();
      for (size_t f = 0; f < n; ++f) payload_bytes += fields[f].bytes;
      hash = SamplePayloadHash(fields, n);
    }
    if (samples != 1) return false;
    sample->fields.clear();
    sample->shapes.clear();
    sample->fields_in_record = true;
    sample->stored_record.assign(value);
    sample->stored_payload_hash = hash;
    sample->stored_payload_bytes = payload_bytes;
    return true;
  }

  std::unique_ptr<SplitSource> inner_;
  std::shared_ptr<const DbReader> old_db_;
  std::vector<int64_t> old_index_;
  std::vector<uint64_t> old_hashes_;
  mutable tbb::enumerable_thread_specific<std::unique_ptr<SplitReader>> readers_;
};

}  // namespace

std::vector<InputFile> CurrentInputs(const SourceInfo& info) {
  if (!info.inputs.empty()) return info.inputs;
  std::vector<InputFile> files;
  const fs::path raw(info.path);
  std::error_code ec;
  if (!fs::is_directory(raw, ec)) return {Stat(raw, raw.filename().string())};
  for (fs::directory_iterator it(raw, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name[0] != '.' && it->is_regular_file(ec)) files.push_back(Stat(it->path(), name));
  }
  std::sort(files.begin(), files.end(), [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  return files;
}

std::string InputsHash(const std::string& inputs_json) {
  return FormatHash(XXH64(inputs_json.data(), inputs_json.size(), 0));
}

std::string InputsJson(const Source& source, const BuildOptions& options, const BuildSummary& summary) {
  nlohmann::json files = nlohmann::json::array();
  for (const InputFile& f : CurrentInputs(source.info)) files.push_back({f.path, f.size, f.mtime_ns});
  nlohmann::json j = {{"raw", source.info.path},
                      {"options", RecordedOptions(source, options)},
                      {"class_names", source.info.class_names},
                      {"files", files},
                      {"items", nlohmann::json::object()}};
  if (source.info.items_are_files) {
    for (const auto& split : source.splits) {
      std::set<std::string> rejected;
      for (const RejectedItem& r : summary.rejected) {
        if (r.split == split->name()) rejected.insert(r.item);
      }
      nlohmann::json names = nlohmann::json::array(), labels = nlohmann::json::array();
      for (uint64_t k = 0; k < split->size(); ++k) {
        std::string name = split->ItemName(k);
        if (rejected.count(name) > 0) continue;
        names.push_back(std::move(name));
        labels.push_back(split->ItemLabel(k));
      }
      if (LabelledByTable(source.info.options)) j["labels"][split->name()] = std::move(labels);
      // Each sample's payload hash, for --update to copy its record without
      // decompressing it; only where every written sample's is known.
      for (const SplitSummary& s : summary.splits) {
        if (s.name != split->name() || s.payload_hashes.size() != names.size()) continue;
        std::string hex;
        hex.reserve(16 * s.payload_hashes.size());
        char digits[17];
        for (uint64_t h : s.payload_hashes) {
          std::snprintf(digits, sizeof(digits), "%016llx", static_cast<unsigned long long>(h));
          hex += digits;
        }
        j["payload_hashes"][split->name()] = std::move(hex);
      }
      j["items"][split->name()] = std::move(names);
    }
  }
  return DumpJson(j);
}

namespace {

// "payload_hashes"'s string for a split of `items` samples: 16 hex digits each.
StatusOr<std::vector<uint64_t>> ParsePayloadHashes(const std::string& hex, size_t items) {
  if (hex.size() != 16 * items) {
    return Status::Corruption("payload_hashes of " + std::to_string(hex.size()) + " digits for " +
                              std::to_string(items) + " items");
  }
  std::vector<uint64_t> hashes(items);
  for (size_t k = 0; k < items; ++k) {
    uint64_t h = 0;
    for (size_t d = 16 * k; d < 16 * (k + 1); ++d) {
      const char c = hex[d];
      const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v < 0) return Status::Corruption("payload_hashes holds a character that is not a hex digit");
      h = h << 4 | static_cast<uint64_t>(v);
    }
    hashes[k] = h;
  }
  return hashes;
}

}  // namespace

StatusOr<DbInputs> ReadDbInputs(const std::string& db) {
  const std::string path = db + "/" + kInputsFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound(db + ": no record of what it was built from (" + kInputsFile + ")");
  std::string text, manifest_text;
  GRANARY_RETURN_IF_ERROR(ReadFile(path, &text));
  GRANARY_RETURN_IF_ERROR(ReadFile(db + "/manifest.json", &manifest_text));
  GRANARY_ASSIGN_OR_RETURN(const Manifest manifest, ParseManifest(manifest_text, db + "/manifest.json"));
  auto vouched = manifest.build_options.find(kInputsHashOption);
  if (vouched == manifest.build_options.end() || vouched->second != InputsHash(text)) {
    return Status::Corruption(path + ": not the file the build wrote (its hash is not the manifest's " +
                              kInputsHashOption + ")");
  }
  DbInputs in;
  try {
    const nlohmann::json j = ParseJson(text);
    in.raw = j.at("raw").get<std::string>();
    in.options = j.at("options").get<std::map<std::string, std::string>>();
    in.class_names = j.at("class_names").get<std::vector<std::string>>();
    for (const auto& f : j.at("files")) {
      in.files.push_back({f.at(0).get<std::string>(), f.at(1).get<uint64_t>(), f.at(2).get<int64_t>()});
    }
    for (const auto& [split, names] : j.at("items").items()) in.items[split] = names.get<std::vector<std::string>>();
    if (j.contains("labels")) {
      for (const auto& [split, labels] : j.at("labels").items()) {
        in.labels[split] = labels.get<std::vector<int64_t>>();
        const auto items = in.items.find(split);
        const size_t count = items == in.items.end() ? 0 : items->second.size();
        if (in.labels[split].size() != count) {
          return Status::Corruption(path + ", split '" + split + "': labels for " +
                                    std::to_string(in.labels[split].size()) + " of its " + std::to_string(count) +
                                    " items");
        }
      }
    }
    if (j.contains("payload_hashes")) {
      for (const auto& [split, hex] : j.at("payload_hashes").items()) {
        auto names = in.items.find(split);
        StatusOr<std::vector<uint64_t>> hashes =
            ParsePayloadHashes(hex.get<std::string>(), names == in.items.end() ? 0 : names->second.size());
        if (!hashes.ok()) return hashes.status().WithContext(path + ", split '" + split + "'");
        in.payload_hashes[split] = std::move(hashes).value();
      }
    }
  } catch (const std::exception& e) {
    return Status::Corruption(path + ": " + e.what());
  }
  return in;
}

std::string InputChanges::FilesText() const {
  std::string text;
  for (const auto& [n, what] : {std::pair{added, " added"}, {removed, " removed"}, {changed, " changed"}}) {
    if (n > 0) text += (text.empty() ? "" : ", ") + std::to_string(n) + what;
  }
  text = text.empty() ? "" : "input files: " + text;
  for (const std::string& table : tables) text += (text.empty() ? "" : "; ") + ("labels table " + table + " changed");
  return text.empty() ? "no input file changed" : text;
}

InputChanges CompareInputs(const DbInputs& old, const Source& source, const BuildOptions& options) {
  InputChanges c;
  std::unordered_map<std::string, const InputFile*> before;
  for (const InputFile& f : old.files) before[f.path] = &f;
  for (const InputFile& f : CurrentInputs(source.info)) {
    auto it = before.find(f.path);
    if (it == before.end()) {
      ++c.added;
    } else {
      (it->second->size == f.size && it->second->mtime_ns == f.mtime_ns ? c.unchanged : c.changed) += 1;
      before.erase(it);
    }
  }
  c.removed = before.size();
  const std::map<std::string, std::string> now = RecordedOptions(source, options);
  std::set<std::string> keys;
  for (const auto& [k, v] : now) keys.insert(k);
  for (const auto& [k, v] : old.options) keys.insert(k);
  for (const std::string& k : keys) {
    auto a = old.options.find(k), b = now.find(k);
    // Dbs built before sizes were recorded in one spelling hold --size as it was typed.
    const std::string was = a == old.options.end() ? "(none)" : k == "size" ? RecordedSize(a->second) : a->second;
    const std::string is = b == now.end() ? "(none)" : b->second;
    if (was == is) continue;
    if (IsLabelsHash(k) && a != old.options.end() && b != now.end()) {  // the same table, edited: data, not options
      c.tables.push_back(k == kLabelsHash ? now.count("labels") ? now.at("labels") : "--labels"
                                          : "of split '" + k.substr(0, k.size() - kSplitLabelsHash.size()) + "'");
    } else {
      c.options.push_back(k + ": " + was + " -> " + is);
    }
  }
  c.classes_differ = old.class_names != source.info.class_names;
  return c;
}

Source ReuseUnchangedItems(Source source, const DbInputs& old, std::shared_ptr<const DbReader> old_db,
                           uint64_t* reused) {
  *reused = 0;
  // A label is a class's index: with other classes an old sample's label may be wrong.
  if (!source.info.items_are_files || old.class_names != source.info.class_names) return source;
  bool relabelled = false;
  for (const auto& [key, value] : source.info.options) {
    auto was = old.options.find(key);
    relabelled = relabelled || (IsLabelsHash(key) && (was == old.options.end() || was->second != value));
  }
  std::unordered_map<std::string, const InputFile*> before;
  for (const InputFile& f : old.files) before[f.path] = &f;
  std::unordered_map<std::string, const InputFile*> now;
  const std::vector<InputFile> current = CurrentInputs(source.info);
  for (const InputFile& f : current) now[f.path] = &f;
  for (auto& split : source.splits) {
    auto names = old.items.find(split->name());
    if (names == old.items.end()) continue;
    std::unordered_map<std::string, int64_t> old_index;
    for (size_t k = 0; k < names->second.size(); ++k) old_index[names->second[k]] = static_cast<int64_t>(k);
    // Where a table labels the items, an item is unchanged only if its class is: the old ones are recorded
    // (a db built before they were is read anew once its table changes).
    auto labels = old.labels.find(split->name());
    if (labels == old.labels.end() && relabelled) continue;
    std::vector<int64_t> reuse(split->size(), -1);
    for (uint64_t k = 0; k < split->size(); ++k) {
      const std::string name = split->ItemName(k);
      auto o = old_index.find(name);
      auto was = before.find(name);
      auto is = now.find(name);
      if (o == old_index.end() || was == before.end() || is == now.end()) continue;
      if (was->second->size != is->second->size || was->second->mtime_ns != is->second->mtime_ns) continue;
      if (labels != old.labels.end() && labels->second[static_cast<size_t>(o->second)] != split->ItemLabel(k)) continue;
      reuse[k] = o->second;
      ++*reused;
    }
    auto hashes = old.payload_hashes.find(split->name());
    split = std::make_unique<ReusingSplit>(std::move(split), old_db, std::move(reuse),
                                           hashes == old.payload_hashes.end() ? std::vector<uint64_t>() : hashes->second);
  }
  return source;
}

}  // namespace granary
