#include "store/manifest.h"

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <type_traits>

#include "base/file.h"
#include "base/json_text.h"
#include "store/format.h"

namespace granary {

using nlohmann::json;

const SplitInfo* Manifest::FindSplit(const std::string& name) const {
  for (const SplitInfo& s : splits) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string Manifest::ClassName(int64_t c) const {
  return c >= 0 && static_cast<size_t>(c) < class_names.size() ? class_names[c] : std::to_string(c);
}

std::string SplitNames(const Manifest& manifest) {
  std::string names;
  for (const SplitInfo& split : manifest.splits) names += (names.empty() ? "" : ", ") + split.name;
  return names.empty() ? "none" : names;
}

Status NoSuchSplit(const Manifest& manifest, const std::string& db, const std::string& split) {
  return Status::NotFound(db + ": no split '" + split + "' (its splits: " + SplitNames(manifest) + ")");
}

std::string FormatHash(uint64_t hash) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "xxh64:%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

std::string DictionaryHash(const std::string& bytes) {
  return FormatHash(XXH64(bytes.data(), bytes.size(), format::kChecksumSeed));
}

bool HasStatistics(const FieldSpec& field) {
  return IsFloatDType(field.dtype) && !field.HasVariableDims() &&
         field.FixedElements() <= kMaxStatisticsElements;
}

namespace {

// NaN (no value present) as null: JSON has no NaN.
json NumbersOrNull(const std::vector<double>& values) {
  json a = json::array();
  for (double v : values) a.push_back(std::isnan(v) ? json(nullptr) : json(v));
  return a;
}

json StatisticsToJson(const Manifest& m) {
  json doc = json::object();
  for (const auto& [split, fields] : m.statistics) {
    for (const auto& [name, f] : fields) {
      doc[split][name] = {{"samples", f.samples},          {"missing", f.missing},
                          {"mean", NumbersOrNull(f.mean)}, {"std", NumbersOrNull(f.stddev)},
                          {"min", NumbersOrNull(f.min)},   {"max", NumbersOrNull(f.max)}};
    }
  }
  return doc;
}

}  // namespace

std::string ManifestToJson(const Manifest& m) {
  json fields = json::array();
  for (const FieldSpec& f : m.schema.fields) {
    json field = {{"name", f.name}, {"dtype", DTypeName(f.dtype)}, {"shape", f.shape}};
    if (!f.layout.empty()) field["layout"] = f.layout;
    fields.push_back(field);
  }
  json splits = json::array();
  for (const SplitInfo& s : m.splits) {
    json shards = json::array();
    for (const ShardInfo& sh : s.shards) {
      shards.push_back({{"path", sh.path}, {"first", sh.first}, {"count", sh.count}, {"bytes", sh.bytes}});
    }
    splits.push_back({{"name", s.name}, {"count", s.count}, {"content_hash", s.content_hash}, {"shards", shards}});
  }
  json rejected = json::array();
  for (const RejectedItem& r : m.rejected) {
    rejected.push_back({{"split", r.split}, {"item", r.item}, {"reason", r.reason}});
  }
  json compression = {{"codec", m.codec}, {"level", m.zstd_level}, {"dictionary", nullptr}};
  if (!m.dictionary_path.empty()) {
    compression["dictionary"] = {
        {"path", m.dictionary_path}, {"bytes", m.dictionary_bytes}, {"hash", m.dictionary_hash}};
  }
  json doc = {
      {"format", format::kFormatName},
      {"format_version", m.format_version},
      {"builder", m.builder},
      {"created_utc", m.created_utc},
      {"schema", {{"fields", fields}}},
      {"label_field", m.label_field},
      {"num_classes", m.num_classes},
      {"class_names", m.class_names},
      {"compression", compression},
      {"source", {{"kind", m.source_kind}, {"path", m.source_path}}},
      {"build_options", m.build_options},
      {"splits", splits},
      {"content_hash", m.content_hash},
      {"rejected", rejected},
      {"notes", m.notes},
  };
  if (!m.statistics.empty()) doc["statistics"] = StatisticsToJson(m);
  if (!m.element_names.empty()) doc["element_names"] = m.element_names;
  if (!m.class_counts.empty()) doc["class_counts"] = m.class_counts;
  return DumpJson(doc, 2) + "\n";
}

namespace {

// More classes than this cannot be meant (a classifier's last layer).
constexpr int64_t kMaxClasses = int64_t{1} << 24;

// Reads doc[key] as T, naming the key when it is missing or of the wrong type.
template <typename T>
Status Get(const json& doc, const char* key, T* out, const std::string& where) {
  auto it = doc.find(key);
  if (it == doc.end()) return Status::Corruption(where + ": missing \"" + key + "\"");
  const auto not_integer = [&] {
    const std::string kind = std::is_unsigned_v<T> ? "a non-negative integer" : "an integer";
    return Status::Corruption(where + ": \"" + key + "\" is " + it->dump() + ", not " + kind + " in range");
  };
  if constexpr (std::is_integral_v<T>) {
    if (!JsonIntegerFits<T>(*it)) return not_integer();
  } else if constexpr (std::is_same_v<T, Shape> || std::is_same_v<T, std::vector<uint64_t>>) {
    if (!it->is_array()) return Status::Corruption(where + ": \"" + key + "\" has the wrong type");
    for (const json& element : *it) {
      if (!JsonIntegerFits<typename T::value_type>(element)) return not_integer();
    }
  }
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    return Status::Corruption(where + ": \"" + key + "\" has the wrong type");
  }
  return Status::OK();
}

// Paths in a manifest must stay inside the db directory.
Status CheckRelativePath(const std::string& path, const std::string& where) {
  if (path.empty() || path[0] == '/' || path.find("..") != std::string::npos) {
    return Status::Corruption(where + ": path '" + path + "' is not inside the db");
  }
  return Status::OK();
}

Status ParseSchema(const json& doc, Schema* schema, const std::string& origin) {
  const std::string where = origin + ": schema";
  auto fields = doc.find("fields");
  if (fields == doc.end() || !fields->is_array()) return Status::Corruption(where + ": missing \"fields\" array");
  for (const json& f : *fields) {
    if (!f.is_object()) return Status::Corruption(where + ": field is not an object");
    FieldSpec spec;
    std::string dtype;
    GRANARY_RETURN_IF_ERROR(Get(f, "name", &spec.name, where));
    GRANARY_RETURN_IF_ERROR(Get(f, "dtype", &dtype, where));
    GRANARY_RETURN_IF_ERROR(Get(f, "shape", &spec.shape, where));
    if (f.contains("layout")) GRANARY_RETURN_IF_ERROR(Get(f, "layout", &spec.layout, where));
    StatusOr<DType> parsed = ParseDType(dtype);
    if (!parsed.ok()) return Status::Corruption(where + ": field '" + spec.name + "': " + parsed.status().message());
    spec.dtype = parsed.value();
    schema->fields.push_back(std::move(spec));
  }
  Status valid = schema->Validate();
  if (!valid.ok()) return Status::Corruption(where + ": " + valid.message());
  // A sample's fields must fit a record's payload: bounds what readers allocate.
  for (const FieldSpec& f : schema->fields) {
    uint64_t bytes = DTypeBytes(f.dtype);
    for (int64_t dim : f.shape) {
      if (dim == kVariableDim) continue;
      if (static_cast<uint64_t>(dim) > format::kMaxPayloadBytes / bytes) {
        return Status::Corruption(where + ": field '" + f.name + "' of shape " + ShapeToString(f.shape) +
                                  " is larger than a record may hold (" + std::to_string(format::kMaxPayloadBytes) +
                                  " bytes)");
      }
      bytes *= static_cast<uint64_t>(dim);
    }
  }
  return Status::OK();
}

// What a build recorded beside the records: the items it rejected, and its
// notes (optional: dbs built before December 2026 have none).
Status ParseBuildRecord(const json& doc, const std::string& origin, Manifest* m) {
  auto rejected = doc.find("rejected");
  if (rejected != doc.end() && rejected->is_array()) {
    for (const json& r : *rejected) {
      RejectedItem item;
      GRANARY_RETURN_IF_ERROR(Get(r, "split", &item.split, origin + ": rejected"));
      GRANARY_RETURN_IF_ERROR(Get(r, "item", &item.item, origin + ": rejected"));
      GRANARY_RETURN_IF_ERROR(Get(r, "reason", &item.reason, origin + ": rejected"));
      m->rejected.push_back(std::move(item));
    }
  }
  auto notes = doc.find("notes");
  if (notes != doc.end() && notes->is_array()) {
    for (const json& n : *notes) {
      if (!n.is_string()) return Status::Corruption(origin + ": notes: not an array of strings");
      m->notes.push_back(n.get<std::string>());
    }
  }
  return Status::OK();
}

// One field's statistics (`where` names it), checked against its split and
// field: counts within the split's, one value per element, a value exactly
// where one is present, finite, and a deviation that is not negative.
Status ParseFieldStatistics(const json& j, const std::string& where, const SplitInfo& split,
                            const FieldSpec& field, FieldStatistics* out) {
  if (!j.is_object()) return Status::Corruption(where + ": not an object");
  GRANARY_RETURN_IF_ERROR(Get(j, "samples", &out->samples, where));
  if (out->samples != split.count) {
    return Status::Corruption(where + ": samples " + std::to_string(out->samples) + ", the split has " +
                              std::to_string(split.count));
  }
  const size_t n = static_cast<size_t>(field.FixedElements());
  GRANARY_RETURN_IF_ERROR(Get(j, "missing", &out->missing, where));
  if (out->missing.size() != n) return Status::Corruption(where + ": missing: not " + std::to_string(n) + " values");
  const std::pair<const char*, std::vector<double>*> arrays[] = {
      {"mean", &out->mean}, {"std", &out->stddev}, {"min", &out->min}, {"max", &out->max}};
  for (const auto& [name, values] : arrays) {
    auto a = j.find(name);
    if (a == j.end() || !a->is_array() || a->size() != n) {
      return Status::Corruption(where + ": " + name + ": not an array of " + std::to_string(n) + " values");
    }
    for (size_t i = 0; i < n; ++i) {
      const json& v = (*a)[i];
      const bool none = out->missing[i] == out->samples;
      if (out->missing[i] > out->samples || (none ? !v.is_null() : !v.is_number()) ||
          (v.is_number() && !std::isfinite(v.get<double>())) ||
          (v.is_number() && values == &out->stddev && v.get<double>() < 0)) {
        return Status::Corruption(where + ": " + name + "[" + std::to_string(i) + "] is not what " +
                                  std::to_string(out->samples - std::min(out->missing[i], out->samples)) +
                                  " present values can have");
      }
      values->push_back(none ? std::nan("") : v.get<double>());
    }
  }
  return Status::OK();
}

// The manifest's "element_names" (optional), after its schema: for a field of
// fixed shape, one string per element.
Status ParseElementNames(const json& doc, const std::string& origin, Manifest* m) {
  auto names = doc.find("element_names");
  if (names == doc.end()) return Status::OK();
  if (!names->is_object()) return Status::Corruption(origin + ": element_names: not an object");
  for (const auto& [field_name, of_field] : names->items()) {
    const std::string where = origin + ": element_names." + field_name;
    const int field = m->schema.FieldIndex(field_name);
    if (field < 0 || m->schema.fields[field].HasVariableDims()) {
      return Status::Corruption(where + ": not a field of fixed shape");
    }
    std::vector<std::string>& list = m->element_names[field_name];
    GRANARY_RETURN_IF_ERROR(Get(*names, field_name.c_str(), &list, origin + ": element_names"));
    if (static_cast<int64_t>(list.size()) != m->schema.fields[field].FixedElements()) {
      return Status::Corruption(where + ": " + std::to_string(list.size()) + " names for " +
                                std::to_string(m->schema.fields[field].FixedElements()) + " elements");
    }
  }
  return Status::OK();
}

// The manifest's "class_counts" (optional), after its splits and classes:
// for a split, one count per class, summing to the split's samples.
Status ParseClassCounts(const json& doc, const std::string& origin, Manifest* m) {
  auto counts = doc.find("class_counts");
  if (counts == doc.end()) return Status::OK();
  if (!counts->is_object()) return Status::Corruption(origin + ": class_counts: not an object");
  for (const auto& [split_name, of_split] : counts->items()) {
    const std::string where = origin + ": class_counts." + split_name;
    const SplitInfo* split = m->FindSplit(split_name);
    if (split == nullptr) return Status::Corruption(where + ": no such split");
    std::vector<uint64_t>& list = m->class_counts[split_name];
    GRANARY_RETURN_IF_ERROR(Get(*counts, split_name.c_str(), &list, origin + ": class_counts"));
    uint64_t sum = 0;
    bool fits = static_cast<int64_t>(list.size()) == m->num_classes;
    for (size_t c = 0; fits && c < list.size(); ++c) {
      fits = list[c] <= split->count - sum;  // (no overflow)
      sum += fits ? list[c] : 0;
    }
    if (!fits || sum != split->count) {
      return Status::Corruption(where + ": not one count for each of the db's " + std::to_string(m->num_classes) +
                                " classes summing to the split's " + std::to_string(split->count) + " samples");
    }
  }
  return Status::OK();
}

// The manifest's "statistics" (optional), after its schema and splits.
Status ParseStatistics(const json& doc, const std::string& origin, Manifest* m) {
  auto statistics = doc.find("statistics");
  if (statistics == doc.end()) return Status::OK();
  if (!statistics->is_object()) return Status::Corruption(origin + ": statistics: not an object");
  for (const auto& [split_name, fields] : statistics->items()) {
    const std::string where = origin + ": statistics." + split_name;
    const SplitInfo* split = m->FindSplit(split_name);
    if (split == nullptr) return Status::Corruption(where + ": no such split");
    if (!fields.is_object()) return Status::Corruption(where + ": not an object");
    for (const auto& [field_name, j] : fields.items()) {
      const int index = m->schema.FieldIndex(field_name);
      if (index < 0 || !HasStatistics(m->schema.fields[static_cast<size_t>(index)])) {
        return Status::Corruption(where + "." + field_name + ": not a field that has statistics");
      }
      GRANARY_RETURN_IF_ERROR(ParseFieldStatistics(j, where + "." + field_name, *split,
                                                   m->schema.fields[static_cast<size_t>(index)],
                                                   &m->statistics[split_name][field_name]));
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& origin) {
  json doc = ParseJson(text);
  if (IsGitLfsPointer(text)) return Status::Corruption(origin + ": is " + kGitLfsAdvice);
  if (doc.is_discarded()) return Status::Corruption(origin + ": " + WhyNotJson(text));
  if (!doc.is_object()) return Status::Corruption(origin + ": not a JSON object");
  std::string format_name;
  GRANARY_RETURN_IF_ERROR(Get(doc, "format", &format_name, origin));
  if (format_name != format::kFormatName) {
    return Status::Corruption(origin + ": \"format\" is '" + format_name + "', not '" + format::kFormatName + "'");
  }
  Manifest m;
  GRANARY_RETURN_IF_ERROR(Get(doc, "format_version", &m.format_version, origin));
  if (m.format_version > format::kFormatVersion) {
    return Status::FailedPrecondition(origin + ": format version " + std::to_string(m.format_version) +
                                      " is newer than this reader's " + std::to_string(format::kFormatVersion) +
                                      "; upgrade granary");
  }
  if (m.format_version < 1) return Status::Corruption(origin + ": format version " + std::to_string(m.format_version));
  GRANARY_RETURN_IF_ERROR(Get(doc, "builder", &m.builder, origin));
  GRANARY_RETURN_IF_ERROR(Get(doc, "created_utc", &m.created_utc, origin));
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_object()) return Status::Corruption(origin + ": missing \"schema\"");
  GRANARY_RETURN_IF_ERROR(ParseSchema(*schema, &m.schema, origin));
  GRANARY_RETURN_IF_ERROR(Get(doc, "label_field", &m.label_field, origin));
  GRANARY_RETURN_IF_ERROR(Get(doc, "num_classes", &m.num_classes, origin));
  if (m.num_classes < 0 || m.num_classes > kMaxClasses) {
    return Status::Corruption(origin + ": num_classes " + std::to_string(m.num_classes) + " is outside 0.." +
                              std::to_string(kMaxClasses));
  }
  GRANARY_RETURN_IF_ERROR(Get(doc, "class_names", &m.class_names, origin));
  auto compression = doc.find("compression");
  if (compression == doc.end()) return Status::Corruption(origin + ": missing \"compression\"");
  GRANARY_RETURN_IF_ERROR(Get(*compression, "codec", &m.codec, origin + ": compression"));
  GRANARY_RETURN_IF_ERROR(Get(*compression, "level", &m.zstd_level, origin + ": compression"));
  auto dictionary = compression->find("dictionary");
  if (dictionary != compression->end() && !dictionary->is_null()) {
    const std::string where = origin + ": compression.dictionary";
    GRANARY_RETURN_IF_ERROR(Get(*dictionary, "path", &m.dictionary_path, where));
    GRANARY_RETURN_IF_ERROR(Get(*dictionary, "bytes", &m.dictionary_bytes, where));
    GRANARY_RETURN_IF_ERROR(Get(*dictionary, "hash", &m.dictionary_hash, where));
    GRANARY_RETURN_IF_ERROR(CheckRelativePath(m.dictionary_path, where));
  }
  auto source = doc.find("source");
  if (source == doc.end()) return Status::Corruption(origin + ": missing \"source\"");
  GRANARY_RETURN_IF_ERROR(Get(*source, "kind", &m.source_kind, origin + ": source"));
  GRANARY_RETURN_IF_ERROR(Get(*source, "path", &m.source_path, origin + ": source"));
  GRANARY_RETURN_IF_ERROR(Get(doc, "build_options", &m.build_options, origin));
  GRANARY_RETURN_IF_ERROR(Get(doc, "content_hash", &m.content_hash, origin));

  auto splits = doc.find("splits");
  if (splits == doc.end() || !splits->is_array()) return Status::Corruption(origin + ": missing \"splits\" array");
  for (const json& s : *splits) {
    SplitInfo split;
    const std::string where = origin + ": split";
    GRANARY_RETURN_IF_ERROR(Get(s, "name", &split.name, where));
    GRANARY_RETURN_IF_ERROR(Get(s, "count", &split.count, where + " '" + split.name + "'"));
    GRANARY_RETURN_IF_ERROR(Get(s, "content_hash", &split.content_hash, where + " '" + split.name + "'"));
    auto shards = s.find("shards");
    if (shards == s.end() || !shards->is_array() || shards->empty()) {
      return Status::Corruption(where + " '" + split.name + "': missing \"shards\"");
    }
    uint64_t total = 0;
    for (const json& sh : *shards) {
      ShardInfo shard;
      GRANARY_RETURN_IF_ERROR(Get(sh, "path", &shard.path, where + " '" + split.name + "' shard"));
      GRANARY_RETURN_IF_ERROR(Get(sh, "first", &shard.first, where + " '" + split.name + "' shard"));
      GRANARY_RETURN_IF_ERROR(Get(sh, "count", &shard.count, where + " '" + split.name + "' shard"));
      if (shard.first != total) {
        return Status::Corruption(where + " '" + split.name + "': shard '" + shard.path + "' starts at " +
                                  std::to_string(shard.first) + ", not " + std::to_string(total));
      }
      GRANARY_RETURN_IF_ERROR(Get(sh, "bytes", &shard.bytes, where + " '" + split.name + "' shard"));
      GRANARY_RETURN_IF_ERROR(CheckRelativePath(shard.path, where + " '" + split.name + "'"));
      if (shard.count > UINT64_MAX - total) {
        return Status::Corruption(where + " '" + split.name + "': shard counts overflow 64 bits");
      }
      total += shard.count;
      split.shards.push_back(std::move(shard));
    }
    if (total != split.count) {
      return Status::Corruption(where + " '" + split.name + "': shard counts sum to " + std::to_string(total) +
                                ", split count is " + std::to_string(split.count));
    }
    m.splits.push_back(std::move(split));
  }
  GRANARY_RETURN_IF_ERROR(ParseBuildRecord(doc, origin, &m));
  GRANARY_RETURN_IF_ERROR(ParseStatistics(doc, origin, &m));
  GRANARY_RETURN_IF_ERROR(ParseElementNames(doc, origin, &m));
  GRANARY_RETURN_IF_ERROR(ParseClassCounts(doc, origin, &m));
  if (!m.label_field.empty() && m.schema.FieldIndex(m.label_field) < 0) {
    return Status::Corruption(origin + ": label_field '" + m.label_field + "' is not in the schema");
  }
  return m;
}

}  // namespace granary
