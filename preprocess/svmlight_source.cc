// LIBSVM (svmlight) files, as the LIBSVM datasets page and scikit-learn's
// dump_svmlight_file write them: a line a sample, its label and then its
// non-zero features as index:value ("-1 3:1 11:1 14:1"). Streamed as a CSV
// table of whitespace-separated fields (preprocess/csv_table.h), each row
// made dense when it is produced.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "base/file.h"
#include "preprocess/class_labels.h"
#include "preprocess/compressed_input.h"
#include "preprocess/csv_table.h"
#include "preprocess/source.h"

namespace granary {
namespace {

// The most features a row is made dense to: 390 KiB a sample.
constexpr uint64_t kMaxDenseFeatures = 100000;

// "3:1.5" into *index and *value; false for anything else.
bool ParseIndexValue(const std::string& token, uint64_t* index, float* value) {
  const size_t colon = token.find(':');
  if (colon == 0 || colon == std::string::npos || token.find_first_not_of("0123456789") < colon) return false;
  char* end = nullptr;
  *index = std::strtoull(token.c_str(), &end, 10);
  double x = 0;
  if (end != token.c_str() + colon || colon > 18 || !ParseDecimal(token.substr(colon + 1), &x)) return false;
  *value = static_cast<float>(x);
  return true;
}

// A line's features: tokens after the label up to a "#" comment.
size_t FeatureTokens(const std::vector<std::string>& fields) {
  size_t n = 1;
  while (n < fields.size() && (fields[n].empty() || fields[n][0] != '#')) ++n;
  return n - 1;
}

// The rows of one part of a LIBSVM file (the first `limit` of them, 0: all),
// each its label's class (or value) and its features made dense: `width`
// of them, index i at i - first_index.
class SvmlightSplit : public SplitSource {
 public:
  SvmlightSplit(std::string name, std::shared_ptr<const CsvTable> table, int part, uint64_t limit, size_t width,
                uint64_t first_index, std::shared_ptr<const std::map<std::string, int64_t>> classes,
                uint64_t raw_bytes)
      : name_(std::move(name)), table_(std::move(table)), part_(part), width_(width), first_index_(first_index),
        classes_(std::move(classes)), raw_bytes_(raw_bytes) {
    size_ = table_->rows(part_);
    if (limit > 0 && limit < size_) size_ = limit;
  }

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override {
    uint64_t line = 0;
    if (!table_->ReadRow(part_, index, nullptr, &line).ok()) {
      return table_->path() + " (item " + std::to_string(index) + " of split " + name_ + ")";  // the file changed
    }
    return table_->path() + ":" + std::to_string(line);
  }

  Status Produce(uint64_t index, Sample* sample) const override {
    thread_local std::vector<std::string> fields;
    uint64_t line = 0;
    GRANARY_RETURN_IF_ERROR(table_->ReadRow(part_, index, &fields, &line));
    std::vector<float> dense(width_, 0.0f);
    const size_t tokens = FeatureTokens(fields);
    for (size_t t = 1; t <= tokens; ++t) {
      uint64_t i = 0;
      float value = 0;
      if (!ParseIndexValue(fields[t], &i, &value)) {
        return Status::InvalidArgument("'" + fields[t] + "' is no index:value feature");
      }
      if (i < first_index_ || i - first_index_ >= width_) {
        return Status::InvalidArgument("feature index " + std::to_string(i) + " is outside the db's " +
                                       std::to_string(first_index_) + ".." +
                                       std::to_string(first_index_ + width_ - 1));
      }
      dense[i - first_index_] = value;
    }
    sample->fields.resize(2);
    sample->fields[0].assign(reinterpret_cast<const char*>(dense.data()), dense.size() * sizeof(float));
    const std::string& value = fields.front();
    if (classes_ == nullptr) {
      double x = 0;
      if (!ParseDecimal(value, &x)) return Status::InvalidArgument("label '" + value + "' is no number");
      const float target = static_cast<float>(x);
      sample->fields[1].assign(reinterpret_cast<const char*>(&target), sizeof(target));
      return Status::OK();
    }
    const auto label = classes_->find(value);
    if (label == classes_->end()) return Status::InvalidArgument("label '" + value + "' is not a class");
    sample->fields[1].assign(reinterpret_cast<const char*>(&label->second), sizeof(int64_t));
    return Status::OK();
  }

 private:
  std::string name_;
  std::shared_ptr<const CsvTable> table_;
  int part_;
  uint64_t size_ = 0;
  size_t width_;
  uint64_t first_index_;
  std::shared_ptr<const std::map<std::string, int64_t>> classes_;  // null: the label is a number to predict
  uint64_t raw_bytes_;
};

// What one pass over a LIBSVM file finds: its label values and their rows,
// its largest feature index and whether it uses index 0.
struct SvmlightScan {
  std::shared_ptr<const CsvTable> table;
  std::map<std::string, uint64_t> labels;
  uint64_t largest = 0, values = 0, rows = 0;
  bool index_zero = false, features = false;
};

StatusOr<SvmlightScan> ScanSvmlight(const std::string& path, const CsvOptions& options) {
  SvmlightScan scan;
  const auto on_row = [&](const CsvParser::Row& row, int) -> Status {
    const std::vector<std::string>& fields = *row.fields;
    ++scan.rows;
    if (fields.empty()) return Status::OK();
    if (fields[0].find(':') != std::string::npos) {
      return Status::InvalidArgument(path + ":" + std::to_string(row.line) + ": '" + fields[0] + "' where the "
                                     "label belongs: a LIBSVM line starts with its label (a line of the test data "
                                     "without labels?)");
    }
    if (fields[0].find(',') != std::string::npos) {
      return Status::InvalidArgument(path + ":" + std::to_string(row.line) + ": '" + fields[0] + "': several labels "
                                     "a line (multi-label) are not read; write the samples with a multi-hot field "
                                     "from Python (granary.write)");
    }
    if (!options.regression && ++scan.labels[fields[0]] == 1 && scan.labels.size() > kMaxLabelValues) {
      return Status::InvalidArgument(path + ": over " + std::to_string(kMaxLabelValues) + " distinct labels: "
                                     "prep reads class labels (integers or names)" + RegressionHint(fields[0]));
    }
    const size_t tokens = FeatureTokens(fields);
    for (size_t t = 1; t <= tokens; ++t) {
      if (fields[t].rfind("qid:", 0) == 0) {
        return Status::InvalidArgument(path + ":" + std::to_string(row.line) + ": 'qid:' (a ranking query) is not "
                                       "read: prep reads a LIBSVM file of classes or a number to predict");
      }
      uint64_t index = 0;
      float value = 0;
      if (!ParseIndexValue(fields[t], &index, &value)) continue;  // the row is rejected, named, when produced
      scan.largest = std::max(scan.largest, index);
      scan.index_zero = scan.index_zero || index == 0;
      scan.features = true;
      ++scan.values;
    }
    return Status::OK();
  };
  CsvScanOptions scan_options;
  scan_options.val_fraction = options.val_fraction;
  scan_options.delimiter = kWhitespaceDelimiter;
  scan_options.decimal = '.';
  scan_options.header = false;
  scan_options.temp_dir = options.temp_dir;
  scan_options.show_progress = options.show_progress;
  GRANARY_ASSIGN_OR_RETURN(
      scan.table, CsvTable::Scan(path, scan_options,
                                 [](const std::vector<std::string>&) -> StatusOr<size_t> {
                                   return CsvParser::kAllColumns;
                                 },
                                 on_row));
  return scan;
}

// Refuses the CSV flags a LIBSVM file has no use for.
Status CheckSvmlightFlags(const std::string& path, const CsvOptions& options) {
  std::string flag;
  if (!options.label.empty()) flag = "--label";
  if (!options.drop.empty()) flag = "--drop";
  if (!options.header) flag = "--no-header";
  if (options.delimiter != 0 && options.delimiter != kWhitespaceDelimiter) flag = "--delimiter";
  if (flag.empty()) return Status::OK();
  return Status::InvalidArgument(flag + ": " + path + " is a LIBSVM file (each line its label, then index:value "
                                 "features), which has no columns to name");
}

}  // namespace

bool LooksLikeSvmlight(std::string_view text) {
  size_t lines = 0, with_features = 0, features = 0, others = 0;  // others: tokens that are no index:value
  for (size_t at = 0; at < text.size() && lines < 5;) {
    const size_t end = text.find('\n', at);
    if (end == std::string_view::npos) break;  // the last line may be cut
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    size_t tokens = 0;
    const size_t before = features;
    for (size_t t = 0; t < line.size();) {
      const size_t start = line.find_first_not_of(" \t\r", t);
      if (start == std::string_view::npos || line[start] == '#') break;
      const size_t stop = std::min(line.find_first_of(" \t\r", start), line.size());
      const std::string token(line.substr(start, stop - start));
      uint64_t index = 0;
      float value = 0;
      double x = 0;
      if (tokens++ == 0) {
        if (!ParseDecimal(token, &x) && token.find(',') == std::string::npos) return false;
      } else if (ParseIndexValue(token, &index, &value)) {
        ++features;
      } else if (token.rfind("qid:", 0) != 0) {
        ++others;  // a value that is no number: the line is rejected, named
      }
      t = stop;
    }
    if (tokens == 0) continue;
    ++lines;
    with_features += features > before;
  }
  return lines > 0 && with_features > 0 && others < features;
}

std::string CompressedSvmlight(const std::string& path, const std::vector<std::string>& header) {
  std::string line;  // the header's fields as a line
  for (const std::string& field : header) line += (line.empty() ? "" : " ") + field;
  const std::string compression = CompressionOf(ReadFileEdge(path, 6));
  if (compression.empty() || !LooksLikeSvmlight(line + "\n")) return "";
  return path + ": holds LIBSVM lines ('" + line.substr(0, 40) + "'), " + compression + "-compressed: decompress it "
         "first (" + DecompressCommand(compression, path) + ") and build from the file it gives";
}

StatusOr<Source> OpenSvmlightSource(const std::string& path, const CsvOptions& options) {
  GRANARY_RETURN_IF_ERROR(CheckSvmlightFlags(path, options));
  GRANARY_ASSIGN_OR_RETURN(SvmlightScan scan, ScanSvmlight(path, options));
  Source source;
  SourceInfo& info = source.info;
  // Indices from 1 (LIBSVM's), or from 0 where the file (or the --like db's names) has a 0, as scikit-learn's
  // load_svmlight_file decides.
  uint64_t first = scan.index_zero ? 0 : 1, width = scan.largest + 1 - first;
  if (!options.like.path.empty()) {
    const std::vector<std::string>& names = options.like.feature_names;
    if (names.empty() || (names[0] != "0" && names[0] != "1") || names.back() != std::to_string(
                                                                     std::stoull(names[0]) + names.size() - 1)) {
      return Status::InvalidArgument(options.like.named + ": its features are no LIBSVM file's indices (" +
                                     (names.empty() ? std::string("none") : "'" + names[0] + "', ...") + ")");
    }
    first = names[0] == "0" ? 0 : 1;
    width = names.size();
  } else if (!scan.features) {
    return Status::InvalidArgument(path + ": a LIBSVM file without a feature (every line its label alone)");
  } else if (width > kMaxDenseFeatures) {
    return Status::InvalidArgument(path + ": a LIBSVM file of " + std::to_string(width) + " features (its largest "
                                   "index): prep stores features dense, " + std::to_string(width * 4 >> 10) +
                                   " KiB a sample, and reads at most " + std::to_string(kMaxDenseFeatures) + "; "
                                   "reduce them first (scikit-learn: load_svmlight_file, then TruncatedSVD) and "
                                   "write the rows with granary.write");
  }
  info.kind = "svmlight";
  info.path = path;
  std::set<std::string> values;
  uint64_t labelled = 0;
  for (const auto& [value, rows] : scan.labels) values.insert(value), labelled += rows;
  std::shared_ptr<const std::map<std::string, int64_t>> classes;
  if (options.regression) {
    info.notes.push_back("each line's label is the regression target (--regression): field 'target', float32");
  } else if (!options.like.path.empty()) {
    classes = std::make_shared<const std::map<std::string, int64_t>>(
        ClassesLike(options.like, "label", values, &info.class_names, &info.notes));
  } else {
    GRANARY_RETURN_IF_ERROR(CheckClassLabels(path, "label", values, labelled, /*table=*/true, &info.notes));
    classes = std::make_shared<const std::map<std::string, int64_t>>(ChooseClasses(values, &info.class_names));
  }
  info.label_field = options.regression ? "target" : "label";
  info.num_classes = static_cast<int64_t>(info.class_names.size());
  info.schema.fields = {
      {"features", DType::kFloat32, {static_cast<int64_t>(width)}, ""},
      options.regression ? FieldSpec{"target", DType::kFloat32, {}, ""} : FieldSpec{"label", DType::kInt64, {}, ""}};
  std::vector<std::string>& names = info.element_names["features"];
  for (uint64_t i = 0; i < width; ++i) names.push_back(std::to_string(first + i));
  if (options.like.path.empty()) {
    char mean[32];
    std::snprintf(mean, sizeof(mean), "%.1f", scan.rows == 0 ? 0.0 : static_cast<double>(scan.values) / scan.rows);
    info.notes.push_back("a LIBSVM file: " + std::to_string(width) + " features (indices " + std::to_string(first) +
                         ".." + std::to_string(first + width - 1) + ", the largest it holds; " + mean + " non-zero a "
                         "line), stored dense; a file of held-out lines (a9a.t beside a9a) is built --like this db, "
                         "which gives it as many");
  }
  info.options["format"] = "svmlight";
  const bool held_out = options.val_fraction > 0;
  for (int part = 0; part < (held_out ? 2 : 1); ++part) {
    source.splits.push_back(std::make_unique<SvmlightSplit>(part == 0 ? "train" : "val", scan.table, part,
                                                            options.limit, width, first, classes,
                                                            part == 0 ? scan.table->bytes() : 0));
  }
  return source;
}

}  // namespace granary
