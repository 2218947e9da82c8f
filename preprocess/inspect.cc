#include "preprocess/inspect.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <type_traits>

#include "base/json_text.h"
#include "preprocess/png.h"

namespace granary {
namespace {

using nlohmann::json;

// Payload bytes of `count` records if every field has a fixed shape, else 0.
uint64_t FixedPayloadBytes(const Schema& schema, uint64_t count) {
  uint64_t per_record = 0;
  for (const FieldSpec& f : schema.fields) {
    if (f.HasVariableDims()) return 0;
    per_record += static_cast<uint64_t>(f.FixedElements()) * DTypeBytes(f.dtype);
  }
  return per_record * count;
}

uint64_t StoredBytes(const SplitInfo& split) {
  uint64_t n = 0;
  for (const ShardInfo& s : split.shards) n += s.bytes;
  return n;
}

std::string CompressionText(const Manifest& m) {
  std::string s = m.codec;
  if (m.codec != "none") s += " level " + std::to_string(m.zstd_level);
  if (!m.dictionary_path.empty()) s += ", dictionary " + std::to_string(m.dictionary_bytes) + " bytes";
  return s;
}

// Value i of a field as text.
std::string ValueText(DType dtype, const uint8_t* p, size_t i) {
  auto get = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  return VisitDType(dtype, [&](auto tag) -> std::string {
    const auto v = get(tag);
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
      return buf;
    } else {
      return std::to_string(v);
    }
  });
}

// Value i of a field as JSON: the exact number (a float32 as the double it
// converts to), or for a non-finite float the string "NaN", "Infinity" or
// "-Infinity", which JSON has no numbers for.
json ValueJson(DType dtype, const uint8_t* p, size_t i) {
  auto get = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  auto real = [](double v) -> json {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    return v;
  };
  return VisitDType(dtype, [&](auto tag) -> json {
    const auto v = get(tag);
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      return real(v);
    } else {
      return v;
    }
  });
}

// An image-like uint8 field: [H, W], [C, H, W] or [H, W, C] with C in 1..4.
// Returns false if the shape is not one of these.
bool ImageGeometry(const FieldView& f, int* width, int* height, int* channels, bool* chw) {
  const Shape& s = f.shape;
  if (s.size() == 2) {
    *height = static_cast<int>(s[0]), *width = static_cast<int>(s[1]), *channels = 1, *chw = false;
  } else if (s.size() == 3 && s[0] >= 1 && s[0] <= 4) {
    *channels = static_cast<int>(s[0]), *height = static_cast<int>(s[1]), *width = static_cast<int>(s[2]), *chw = true;
  } else if (s.size() == 3 && s[2] >= 1 && s[2] <= 4) {
    *height = static_cast<int>(s[0]), *width = static_cast<int>(s[1]), *channels = static_cast<int>(s[2]), *chw = false;
  } else {
    return false;
  }
  return *width > 0 && *height > 0;
}

Status WriteFieldPng(const FieldView& f, const std::string& path) {
  int width, height, channels;
  bool chw;
  if (!ImageGeometry(f, &width, &height, &channels, &chw)) {
    return Status::InvalidArgument("shape " + ShapeToString(f.shape) + " is not an image");
  }
  std::vector<uint8_t> hwc(f.data, f.data + f.bytes);
  if (chw) {
    const size_t plane = static_cast<size_t>(width) * height;
    for (int c = 0; c < channels; ++c) {
      for (size_t i = 0; i < plane; ++i) hwc[i * channels + c] = f.data[c * plane + i];
    }
  }
  return WritePng(path, hwc.data(), width, height, channels);
}

// Classes prep info names (on the label's line, in the counts' table).
constexpr size_t kShownClasses = 20;

// The first `shown` of `names`, comma-separated, then ")" (or, where more
// are left out, ", ...: prep info --json names all)").
std::string NamesUpTo(const std::vector<std::string>& names, size_t shown) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i) text += (i == 0 ? "" : ", ") + Printable(names[i]);
  return text + (names.size() > shown ? ", ...: prep info --json names all)" : ")");
}

// The samples of each class in each split the manifest counts, a row per
// class (the first kShownClasses), or "" where it counts none.
std::string ClassCountsText(const Manifest& m) {
  if (m.class_counts.empty()) return "";
  std::ostringstream out;
  char cell[64];
  out << "classes      " << std::left << std::setw(20) << "class";
  std::vector<std::pair<std::string, const std::vector<uint64_t>*>> columns;  // in the db's order of splits
  for (const SplitInfo& split : m.splits) {
    if (auto counts = m.class_counts.find(split.name); counts != m.class_counts.end()) {
      columns.emplace_back(split.name, &counts->second);
    }
  }
  for (const auto& [split, counts] : columns) {
    std::snprintf(cell, sizeof cell, " %10s", Printable(split).substr(0, 10).c_str());
    out << cell;
  }
  out << "\n";
  const size_t classes = static_cast<size_t>(m.num_classes);
  for (size_t c = 0; c < classes && c < kShownClasses; ++c) {
    out << "             " << std::setw(20) << Printable(m.ClassName(static_cast<int64_t>(c)));
    for (const auto& [split, counts] : columns) {
      std::snprintf(cell, sizeof cell, " %10llu", static_cast<unsigned long long>((*counts)[c]));
      out << cell;
    }
    out << "\n";
  }
  if (classes > kShownClasses) {
    out << "             (" << classes << " classes in all: prep info --json gives each count)\n";
  }
  return out.str();
}

}  // namespace

std::string DescribeDb(const DbReader& db) {
  const Manifest& m = db.manifest();
  std::ostringstream out;
  char line[256];
  out << "db           " << Printable(db.path()) << "\n";
  out << "format       granary-db v" << m.format_version << " (" << m.builder << ", " << m.created_utc << ")\n";
  out << "source       " << m.source_kind << " " << Printable(m.source_path) << "\n";
  for (size_t i = 0; i < m.schema.fields.size(); ++i) {
    const FieldSpec& f = m.schema.fields[i];
    out << (i == 0 ? "fields       " : "             ") << f.name << " " << DTypeName(f.dtype) << " "
        << ShapeToString(f.shape);
    if (f.IsText()) out << "  (text, UTF-8)";
    if (f.name == m.label_field && IsFloatDType(f.dtype)) {
      out << "  (label: a number to predict, regression)";
    } else if (f.name == m.label_field) {
      out << "  (label, " << m.num_classes << (m.num_classes == 1 ? " class:" : " classes:")
          << (m.class_names.empty() ? ")" : " " + NamesUpTo(m.class_names, kShownClasses));
    }
    if (auto names = m.element_names.find(f.name); names != m.element_names.end()) {
      out << "  (" << NamesUpTo(names->second, 12);
    }
    out << "\n";
  }
  out << "compression  " << CompressionText(m) << "\n";
  std::snprintf(line, sizeof(line), "%-12s %10s %7s %11s %11s %7s\n", "split", "samples", "shards", "stored MB",
                "payload MB", "ratio");
  out << line;
  uint64_t total_count = 0, total_stored = 0, total_payload = 0, total_shards = 0;
  auto row = [&](const std::string& name, uint64_t count, uint64_t shards, uint64_t stored, uint64_t payload) {
    std::string ratio = payload > 0 ? std::to_string(static_cast<double>(stored) / payload).substr(0, 5) : "n/a";
    std::snprintf(line, sizeof(line), "%-12s %10llu %7llu %11.2f %11.2f %7s\n", name.c_str(),
                  static_cast<unsigned long long>(count), static_cast<unsigned long long>(shards), stored / 1e6,
                  payload / 1e6, ratio.c_str());
    out << line;
  };
  for (const SplitInfo& s : m.splits) {
    const uint64_t stored = StoredBytes(s), payload = FixedPayloadBytes(m.schema, s.count);
    row(s.name, s.count, s.shards.size(), stored, payload);
    total_count += s.count;
    total_shards += s.shards.size();
    total_stored += stored;
    total_payload += payload;
  }
  total_stored += m.dictionary_bytes;
  row("total", total_count, total_shards, total_stored, total_payload);
  out << "content      " << m.content_hash << "\n";
  out << ClassCountsText(m);
  bool first_statistics = true;
  for (const auto& [split, by_field] : m.statistics) {
    for (const auto& [field, f] : by_field) {
      uint64_t missing = 0;
      for (uint64_t n : f.missing) missing += n;
      out << (first_statistics ? "statistics   " : "             ") << Printable(split) << "." << Printable(field)
          << ": " << f.mean.size() << " elements over " << f.samples << " samples, " << missing
          << " missing values (mean, std, min, max per element: prep info --json)\n";
      first_statistics = false;
    }
  }
  out << "options     ";
  for (const auto& [k, v] : m.build_options) {
    if (k != "dictionary_choice") out << " " << k << "=" << v;
  }
  const auto choice = m.build_options.find("dictionary_choice");
  if (choice != m.build_options.end()) out << "\ndictionary   " << choice->second;
  out << "\nrejected     " << m.rejected.size() << "\n";
  for (const RejectedItem& r : m.rejected) out << "  " << r.split << ": " << r.item << ": " << r.reason << "\n";
  if (!m.notes.empty()) out << "notes        " << m.notes.size() << "\n";
  for (const std::string& note : m.notes) out << "  " << note << "\n";
  return out.str();
}

std::string DescribeDbJson(const DbReader& db) {
  const Manifest& m = db.manifest();
  json j = ParseJson(ManifestToJson(m));
  json sizes = json::object();
  uint64_t stored_total = m.dictionary_bytes;
  for (const SplitInfo& s : m.splits) {
    sizes[s.name] = {{"stored_bytes", StoredBytes(s)}, {"payload_bytes", FixedPayloadBytes(m.schema, s.count)}};
    stored_total += StoredBytes(s);
  }
  j["sizes"] = sizes;
  j["stored_bytes"] = stored_total;
  j["path"] = db.path();
  return DumpJson(j, 2) + "\n";
}

// Bytes of a text field `prep cat` shows (its --json shows all).
constexpr size_t kTextShown = 1024;

StatusOr<std::string> DescribeRecord(const DbReader& db, const CatOptions& options, bool as_json) {
  auto reader = SplitReader::Create(db, options.split);
  if (!reader.ok()) return reader.status();
  const FieldView* fields = nullptr;
  GRANARY_RETURN_IF_ERROR(reader.value()->Read(options.index, &fields));
  const Manifest& m = db.manifest();
  bool wrote_png = false;
  json j = {{"split", options.split}, {"index", options.index}, {"fields", json::object()}};
  std::ostringstream out;
  out << options.split << "[" << options.index << "]\n";
  for (size_t i = 0; i < m.schema.fields.size(); ++i) {
    const FieldSpec& spec = m.schema.fields[i];
    const FieldView& f = fields[i];
    const size_t count = f.bytes / DTypeBytes(spec.dtype);
    out << "  " << spec.name << " " << DTypeName(spec.dtype) << " " << ShapeToString(f.shape) << ":";
    if (spec.IsText()) {
      const std::string_view text(reinterpret_cast<const char*>(f.data), f.bytes);
      out << " \"" << Printable(text.substr(0, kTextShown)) << "\"";
      if (text.size() > kTextShown) out << " ... (" << text.size() - kTextShown << " more bytes)";
      out << (IsUtf8(text) ? "" : "  (not UTF-8 text: prep verify names it)") << "\n";
      j["fields"][spec.name] = {{"dtype", DTypeName(spec.dtype)}, {"shape", f.shape}, {"text", text}};
      continue;
    }
    const size_t shown = options.max_values == 0 || as_json ? count : std::min(count, options.max_values);
    json values = json::array();
    for (size_t k = 0; k < shown; ++k) {
      if (as_json) {
        values.push_back(ValueJson(spec.dtype, f.data, k));
      } else {
        out << " " << ValueText(spec.dtype, f.data, k);
      }
    }
    if (shown < count) out << " ... (" << count - shown << " more)";
    if (spec.name == m.label_field && count == 1 && !IsFloatDType(spec.dtype)) {
      int64_t label = std::stoll(ValueText(spec.dtype, f.data, 0));
      if (label >= 0 && static_cast<size_t>(label) < m.class_names.size()) {
        out << "  (" << Printable(m.class_names[label]) << ")";
        j["class_name"] = m.class_names[label];
      }
    }
    out << "\n";
    j["fields"][spec.name] = {{"dtype", DTypeName(spec.dtype)}, {"shape", f.shape}, {"values", values}};
    int w, h, c;
    bool chw;
    if (!options.png_path.empty() && !wrote_png && spec.dtype == DType::kUInt8 && ImageGeometry(f, &w, &h, &c, &chw)) {
      GRANARY_RETURN_IF_ERROR(WriteFieldPng(f, options.png_path));
      out << "  wrote field '" << spec.name << "' to " << options.png_path << "\n";
      wrote_png = true;
    }
  }
  if (!options.png_path.empty() && !wrote_png) {
    return Status::InvalidArgument("--png: the schema has no uint8 image field ([H, W], [C, H, W] or [H, W, C])");
  }
  if (as_json) return DumpJson(j) + "\n";
  return out.str();
}

}  // namespace granary
