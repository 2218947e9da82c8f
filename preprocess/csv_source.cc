// CSV tables: a header row, numeric feature columns (float32) and a label
// column (integers, or strings mapped to class indices).
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "base/file.h"
#include "preprocess/source.h"
#include "preprocess/stratified.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

struct CsvRow {
  uint64_t line = 0;  // 1-based line where the row starts
  std::vector<std::string> fields;
};

// RFC 4180: comma separated, fields may be double-quoted (with "" for a quote
// and commas or newlines inside); CRLF, LF or (old Mac OS) CR line ends;
// blank lines skipped; spaces around fields are trimmed later.
Status ParseCsv(const std::string& text, const std::string& origin, std::vector<CsvRow>* rows) {
  CsvRow row;
  std::string field;
  bool quoted = false, row_started = false;
  uint64_t line = 1;
  row.line = 1;
  auto end_field = [&] {
    row.fields.push_back(std::move(field));
    field.clear();
  };
  auto end_row = [&] {
    if (row_started) {
      end_field();
      rows->push_back(std::move(row));
    }
    row = CsvRow();
    row.line = line;
    row_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c == '\n' || c == '\r') {
      ++line;
      end_row();
      continue;
    }
    row_started = true;
    if (c == ',') {
      end_field();
    } else if (c == '"' && field.find_first_not_of(" \t") == std::string::npos) {
      quoted = true;  // spaces before an opening quote are dropped
      field.clear();
    } else {
      field += c;
    }
  }
  if (quoted) return Status::InvalidArgument(origin + ":" + std::to_string(row.line) + ": unterminated quoted field");
  end_row();
  return Status::OK();
}

std::string Trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool IsMissing(const std::string& v) {
  return v.empty() || v == "NA" || v == "N/A" || v == "NaN" || v == "nan" || v == "null" || v == "NULL" || v == "?";
}

// Parses a whole decimal or scientific number that float32 can hold; false if
// anything is left over, for hexadecimal ("0x1b", which strtod reads), and
// for inf, nan and values beyond float32's range (1e39 would be stored as
// inf, which "inf" itself is refused as).
bool ParseNumber(const std::string& v, double* out) {
  if (v.empty() || v.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(v.c_str(), &end);  // underflow gives 0 or a denormal, as float32 would
  return end == v.c_str() + v.size() && std::isfinite(*out) && std::fabs(*out) <= std::numeric_limits<float>::max();
}

class CsvSplit : public SplitSource {
 public:
  CsvSplit(std::string name, std::string origin, std::vector<CsvRow> rows, std::vector<std::string> columns,
           size_t label_column, std::map<std::string, int64_t> classes, MissingPolicy missing, uint64_t raw_bytes)
      : name_(std::move(name)),
        origin_(std::move(origin)),
        rows_(std::move(rows)),
        columns_(std::move(columns)),
        label_column_(label_column),
        classes_(std::move(classes)),
        missing_(missing),
        raw_bytes_(raw_bytes) {}

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return rows_.size(); }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override { return origin_ + ":" + std::to_string(rows_[index].line); }

  Status Produce(uint64_t index, Sample* sample) const override {
    const CsvRow& row = rows_[index];
    if (row.fields.size() != columns_.size()) {
      return Status::InvalidArgument(std::to_string(row.fields.size()) + " fields, the header has " +
                                     std::to_string(columns_.size()));
    }
    sample->fields.resize(2);
    std::string& features = sample->fields[0];
    features.clear();
    for (size_t c = 0; c < row.fields.size(); ++c) {
      if (c == label_column_) continue;
      const std::string v = Trim(row.fields[c]);
      double x = 0;
      if (IsMissing(v)) {
        if (missing_ == MissingPolicy::kReject) return Status::InvalidArgument("column '" + columns_[c] + "': missing value");
        x = missing_ == MissingPolicy::kNaN ? std::nan("") : 0.0;
      } else if (!ParseNumber(v, &x)) {
        const bool infinite = v.find("inf") != std::string::npos || v.find("Inf") != std::string::npos ||
                              v.find("INF") != std::string::npos;
        return Status::InvalidArgument(
            "column '" + columns_[c] + "': '" + v + "' is not a number float32 can hold" +
            (infinite ? " (features must be finite; --missing applies to empty, NA, N/A, NaN, null and ?)"
                      : v.find_first_of("xX") != std::string::npos ? " (decimal numbers only, not hexadecimal)" : ""));
      }
      const float f = static_cast<float>(x);
      features.append(reinterpret_cast<const char*>(&f), sizeof(f));
    }
    auto label = classes_.find(Trim(row.fields[label_column_]));
    if (label == classes_.end()) {
      return Status::InvalidArgument("column '" + columns_[label_column_] + "': label '" +
                                     Trim(row.fields[label_column_]) + "' is missing or not a class");
    }
    sample->fields[1].assign(reinterpret_cast<const char*>(&label->second), sizeof(int64_t));
    return Status::OK();
  }

 private:
  std::string name_;
  std::string origin_;
  std::vector<CsvRow> rows_;
  std::vector<std::string> columns_;
  size_t label_column_;
  std::map<std::string, int64_t> classes_;
  MissingPolicy missing_;
  uint64_t raw_bytes_;
};

struct CsvFile {
  std::string path;
  std::string name;  // split
  std::vector<std::string> header;
  std::vector<CsvRow> rows;
  uint64_t bytes = 0;
};

Status ReadCsv(const std::string& path, CsvFile* out) {
  std::string text;
  GRANARY_RETURN_IF_ERROR(ReadFile(path, &text));
  out->path = path;
  out->bytes = text.size();
  // A UTF-8 byte order mark (spreadsheets write one) is not part of the first header.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  if (text.compare(0, 2, "\xFF\xFE") == 0 || text.compare(0, 2, "\xFE\xFF") == 0 ||
      (text.size() >= 2 && (text[0] == '\0' || text[1] == '\0'))) {
    return Status::InvalidArgument(path + ": is UTF-16 (a byte order mark or NUL bytes): prep reads UTF-8 CSV; "
                                   "save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)");
  }
  std::vector<CsvRow> rows;
  GRANARY_RETURN_IF_ERROR(ParseCsv(text, path, &rows));
  if (rows.empty()) return Status::InvalidArgument(path + ": no header row");
  if (rows.size() == 1) return Status::InvalidArgument(path + ": a header and no data rows");
  for (const std::string& h : rows[0].fields) out->header.push_back(Trim(h));
  out->rows.assign(std::make_move_iterator(rows.begin() + 1), std::make_move_iterator(rows.end()));
  return Status::OK();
}

// The CSV table(s) at `raw`: a file (split train), or a folder's train.csv
// with val.csv and test.csv if present.
StatusOr<std::vector<CsvFile>> ReadCsvFiles(const std::string& raw) {
  std::error_code ec;
  std::vector<CsvFile> files;
  if (fs::is_directory(raw, ec)) {
    for (const char* name : {"train", "val", "test"}) {
      const fs::path p = fs::path(raw) / (std::string(name) + ".csv");
      if (!fs::is_regular_file(p, ec)) continue;
      files.emplace_back();
      files.back().name = name;
      GRANARY_RETURN_IF_ERROR(ReadCsv(p.string(), &files.back()));
    }
    if (files.empty() || files[0].name != "train") {
      return Status::NotFound(raw + ": no train.csv (optionally with val.csv or test.csv)");
    }
  } else {
    files.emplace_back();
    files.back().name = "train";
    GRANARY_RETURN_IF_ERROR(ReadCsv(raw, &files.back()));
  }
  return files;
}

// `text` as an integral number in decimal however it is spelled ("7",
// "07", "7.0", "7e0", "-1"; pandas writes an integer column that held a NaN
// as "7.0"), into *value; false for anything else (hex, "7.5", "inf").
bool IntegralLabel(const std::string& text, int64_t* value) {
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(x) || x != std::floor(x) ||
      std::fabs(x) > 9.0e15) {  // past 2^53 a double no longer tells integers apart
    return false;
  }
  *value = static_cast<int64_t>(x);
  return true;
}

// The classes of the label column: each label value's class, and the
// classes' names in order (*names).
std::map<std::string, int64_t> ChooseClasses(const std::vector<CsvFile>& files, size_t columns, size_t label_column,
                                             std::vector<std::string>* names) {
  // Classes: labels that are all integral numbers, however spelled, by
  // value: non-negative ones as they are, when dense (at most twice as many
  // indices as values, plus a few: a class may be absent from a small
  // table); else in numeric order, named by their values (a label of 594082
  // is one class, not 594083; -1 and 1 are classes 0 and 1). Any other
  // labels: the sorted distinct strings.
  std::set<std::string> values;
  for (const CsvFile& f : files) {
    for (const CsvRow& r : f.rows) {
      if (r.fields.size() == columns && !IsMissing(Trim(r.fields[label_column]))) {
        values.insert(Trim(r.fields[label_column]));
      }
    }
  }
  std::map<std::string, int64_t> classes;
  std::set<int64_t> numbers;  // integral labels in numeric order ("7", "07" and "7.0" are one)
  bool integers = !values.empty();
  for (const std::string& v : values) {
    int64_t x = 0;
    if (!IntegralLabel(v, &x)) {
      integers = false;
      break;
    }
    classes[v] = x;
    numbers.insert(x);
  }
  const bool dense =
      integers && *numbers.begin() >= 0 && *numbers.rbegin() < 2 * static_cast<int64_t>(numbers.size()) + 16;
  if (dense) {
    for (int64_t i = 0; i <= *numbers.rbegin(); ++i) names->push_back(std::to_string(i));
  } else if (integers) {
    std::map<int64_t, int64_t> index;  // label value -> class
    for (int64_t number : numbers) {
      index[number] = static_cast<int64_t>(names->size());
      names->push_back(std::to_string(number));
    }
    for (auto& [v, x] : classes) x = index[x];
  } else {
    classes.clear();
    for (const std::string& v : values) {
      classes[v] = static_cast<int64_t>(names->size());
      names->push_back(v);
    }
  }
  return classes;
}

}  // namespace

StatusOr<Source> OpenCsvSource(const std::string& raw, const CsvOptions& options) {
  std::error_code ec;
  if (!fs::exists(raw, ec)) return Status::NotFound(raw + ": no such file or folder");
  if (options.label.empty()) return Status::InvalidArgument("CSV input needs --label COLUMN");
  GRANARY_ASSIGN_OR_RETURN(std::vector<CsvFile> read, ReadCsvFiles(raw));
  std::vector<CsvFile> files = std::move(read);
  const std::vector<std::string>& header = files[0].header;
  for (const CsvFile& f : files) {
    if (f.header != header) return Status::InvalidArgument(f.path + ": header differs from " + files[0].path + "'s");
  }
  auto at = std::find(header.begin(), header.end(), options.label);
  if (at == header.end()) {
    std::string found;
    for (size_t c = 0; c < header.size() && c < 12; ++c) found += (c > 0 ? ", '" : "'") + header[c] + "'";
    if (header.size() > 12) found += ", ... (" + std::to_string(header.size()) + " in all)";
    std::string hint;
    if (header.size() == 1) {
      for (const char* separator : {";", "\t", "|"}) {
        if (header[0].find(separator) != std::string::npos) {
          hint = std::string("; the header is one column holding '") + (*separator == '\t' ? "\\t" : separator) +
                 "': prep reads comma-separated files (convert it, e.g. sed 's/" + separator + "/,/g')";
          break;
        }
      }
    }
    return Status::InvalidArgument(files[0].path + ": no column '" + options.label + "' for --label (the header's " +
                                   "columns: " + found + ")" + hint);
  }
  std::map<std::string, size_t> named;  // column name -> its first column, 1-based
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c].empty()) {
      return Status::InvalidArgument(files[0].path + ": column " + std::to_string(c + 1) + " of " +
                                     std::to_string(header.size()) + " has no name" +
                                     (c + 1 == header.size() ? " (a trailing comma on the header line?)" : ""));
    }
    const auto [first, fresh] = named.emplace(header[c], c + 1);
    if (!fresh && header[c] != options.label) {
      return Status::InvalidArgument(files[0].path + ": columns " + std::to_string(first->second) + " and " +
                                     std::to_string(c + 1) + " are both named '" + header[c] + "'; rename one");
    }
  }
  const size_t label_column = static_cast<size_t>(at - header.begin());
  if (auto again = std::find(at + 1, header.end(), options.label); again != header.end()) {
    return Status::InvalidArgument(files[0].path + ": --label " + options.label + ": the header has the column twice (" +
                                   std::to_string(label_column + 1) + " and " +
                                   std::to_string(again - header.begin() + 1) + "); rename one");
  }
  if (header.size() < 2) return Status::InvalidArgument(files[0].path + ": no feature columns besides the label");

  Source source;
  const std::map<std::string, int64_t> classes =
      ChooseClasses(files, header.size(), label_column, &source.info.class_names);
  source.info.kind = "csv";
  source.info.path = raw;
  source.info.label_field = "label";
  source.info.num_classes = static_cast<int64_t>(source.info.class_names.size());
  source.info.schema.fields = {{"features", DType::kFloat32, {static_cast<int64_t>(header.size() - 1)}, ""},
                               {"label", DType::kInt64, {}, ""}};

  std::vector<std::string> columns = header;
  // A row's class for --limit's stratified subset; -1 for a row that will be rejected.
  const auto class_of = [&](const CsvRow& r) -> int64_t {
    if (r.fields.size() != columns.size()) return -1;
    const auto found = classes.find(Trim(r.fields[label_column]));
    return found == classes.end() ? -1 : found->second;
  };
  for (CsvFile& f : files) {
    std::vector<CsvRow> rows = std::move(f.rows);
    if (files.size() == 1 && options.val_fraction > 0) {
      std::vector<CsvRow> train, val;
      for (CsvRow& r : rows) {
        const uint64_t h = XXH64(&r.line, sizeof(r.line), 0);  // by line number: deterministic
        (static_cast<double>(h % 1000000) < options.val_fraction * 1e6 ? val : train).push_back(std::move(r));
      }
      KeepStratified(&train, options.limit, class_of);
      KeepStratified(&val, options.limit, class_of);
      const uint64_t bytes = f.bytes;
      source.splits.push_back(std::make_unique<CsvSplit>("train", f.path, std::move(train), columns, label_column,
                                                         classes, options.missing, bytes));
      source.splits.push_back(std::make_unique<CsvSplit>("val", f.path, std::move(val), columns, label_column, classes,
                                                         options.missing, 0));
      continue;
    }
    KeepStratified(&rows, options.limit, class_of);
    source.splits.push_back(std::make_unique<CsvSplit>(f.name, f.path, std::move(rows), columns, label_column, classes,
                                                       options.missing, f.bytes));
  }
  return source;
}

}  // namespace granary
