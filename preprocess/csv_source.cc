// CSV tables: a header row, numeric feature columns (float32) and a label
// column (integers, or strings mapped to class indices; or, --regression, a
// number to predict, float32).
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "base/file.h"
#include "base/json_text.h"
#include "preprocess/class_labels.h"
#include "preprocess/csv_columns.h"
#include "preprocess/csv_table.h"
#include "preprocess/source.h"
#include "preprocess/stratified.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// The rows of one part of a table (all of it, its held-out rows or the
// others), or the `kept` ones of them (--limit), read back as items.
class CsvSplit : public SplitSource {
 public:
  CsvSplit(std::string name, std::shared_ptr<const CsvTable> table, int part, std::vector<uint64_t> kept,
           bool subset, size_t label_column, std::shared_ptr<const std::map<std::string, int64_t>> classes,
           std::shared_ptr<const CsvColumns> columns, MissingPolicy missing, uint64_t raw_bytes)
      : name_(std::move(name)),
        table_(std::move(table)),
        part_(part),
        kept_(std::move(kept)),
        subset_(subset),
        label_column_(label_column),
        classes_(std::move(classes)),
        columns_(std::move(columns)),
        missing_(missing),
        raw_bytes_(raw_bytes) {}

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return subset_ ? kept_.size() : table_->rows(part_); }
  uint64_t raw_bytes() const override { return raw_bytes_; }
  std::string ItemName(uint64_t index) const override {
    uint64_t line = 0;
    if (!table_->ReadRow(part_, Row(index), nullptr, &line).ok()) {
      return table_->path() + " (item " + std::to_string(index) + " of split " + name_ + ")";  // the file changed
    }
    return table_->path() + ":" + std::to_string(line);
  }

  Status Produce(uint64_t index, Sample* sample) const override {
    thread_local std::vector<std::string> fields;
    uint64_t line = 0;
    GRANARY_RETURN_IF_ERROR(table_->ReadRow(part_, Row(index), &fields, &line));
    const std::vector<std::string>& columns = table_->header();
    if (fields.size() != columns.size()) {
      return Status::InvalidArgument(std::to_string(fields.size()) + " fields, the header has " +
                                     std::to_string(columns.size()));
    }
    sample->fields.resize(2);
    sample->fields[0].clear();
    GRANARY_RETURN_IF_ERROR(columns_->Append(fields, missing_, &sample->fields[0]));
    const std::string value = TrimCsvField(fields[label_column_]);
    if (classes_ == nullptr) {
      float target = 0;
      GRANARY_RETURN_IF_ERROR(ParseCsvNumber(columns[label_column_], value, &target, table_->decimal()));
      sample->fields[1].assign(reinterpret_cast<const char*>(&target), sizeof(target));
      return Status::OK();
    }
    auto label = classes_->find(value);
    if (label == classes_->end()) {
      return Status::InvalidArgument("column '" + columns[label_column_] + "': label '" + value +
                                     "' is missing or not a class");
    }
    sample->fields[1].assign(reinterpret_cast<const char*>(&label->second), sizeof(int64_t));
    return Status::OK();
  }

 private:
  uint64_t Row(uint64_t index) const { return subset_ ? kept_[index] : index; }

  std::string name_;
  std::shared_ptr<const CsvTable> table_;
  int part_;
  std::vector<uint64_t> kept_;  // positions in the part, ascending (subset_)
  bool subset_;
  size_t label_column_;
  std::shared_ptr<const std::map<std::string, int64_t>> classes_;  // null: the label is a number to predict
  std::shared_ptr<const CsvColumns> columns_;
  MissingPolicy missing_;
  uint64_t raw_bytes_;
};

// A CSV file of the input, scanned: its split, and how many rows of each
// part hold each label value (rows with the header's number of fields and a
// label; the others are counted in `unlabelled`). A regression target's
// values are not kept: its rows holding a number are counted in `valued`.
struct CsvInput {
  std::string name;  // split: train, val or test
  std::shared_ptr<const CsvTable> table;
  std::map<std::string, std::array<uint64_t, 2>> labels;
  uint64_t valued[2] = {0, 0};
  uint64_t unlabelled[2] = {0, 0};
};

// "; the header is one column holding ';': give --delimiter ';'" where
// `header` is one column holding a delimiter other than `delimiter` (spaces:
// whitespace); "" otherwise.
std::string OneColumnHint(const std::vector<std::string>& header, char delimiter) {
  if (header.size() != 1) return "";
  for (char other : {',', ';', '\t', '|', kWhitespaceDelimiter}) {
    if (other != delimiter && header[0].find(other) != std::string::npos) {
      const std::string held = other == kWhitespaceDelimiter ? "spaces" : QuotedCsvDelimiter(other);
      return "; the header is one column holding " + held + ": give --delimiter " + QuotedCsvDelimiter(other);
    }
  }
  return "";
}

// "the header's columns: 'a', 'b', ...", or "its columns (--no-header): '1', ...".
std::string ColumnsText(const std::vector<std::string>& header, const CsvOptions& options) {
  return (options.header ? "the header's columns: " : "its columns (--no-header): ") + CsvHeaderText(header);
}

// "; its first row holds numbers ('5.1', '3.5'): ..." where `header` holds
// a field that is a decimal number (a table without a header: UCI's
// iris.data); "" otherwise.
std::string NoHeaderHint(const std::vector<std::string>& header) {
  std::string numbers;
  int shown = 0;
  for (const std::string& h : header) {
    double x = 0;
    if (ParseDecimal(h, &x) && shown++ < 2) {
      numbers += (numbers.empty() ? "'" : ", '") + h + "'";
    }
  }
  if (numbers.empty()) return "";
  return "; its first row holds numbers (" + numbers + "): a table without a header? --no-header reads it so, its "
         "columns named 1.." + std::to_string(header.size()) + " (--label " + std::to_string(header.size()) +
         " for the last)";
}

// The one column of `header` named like a label (ColumnsNamedLikeALabel), or an error
// saying --label is needed.
StatusOr<std::string> LabelNamed(const std::string& path, const std::vector<std::string>& header,
                                 const CsvOptions& options) {
  const std::vector<std::string> named = ColumnsNamedLikeALabel(header);
  if (named.size() == 1) return named[0];
  if (named.size() > 1) {
    return Status::InvalidArgument(path + ": give --label COLUMN: columns '" + named[0] + "' and '" + named[1] +
                                   "' are both named like a label");
  }
  if (const std::string libsvm = CompressedSvmlight(path, header); !libsvm.empty()) {
    return Status::InvalidArgument(libsvm);
  }
  return Status::InvalidArgument(path + ": give --label COLUMN: no column is named label, target, class or y (" +
                                 ColumnsText(header, options) + ")" + OneColumnHint(header, options.delimiter) +
                                 (options.header ? NoHeaderHint(header) : "") +
                                 ImagesNamedHint(path, header, options.delimiter));
}

// The label column of `header` (the first file's, at `path`, read with
// `options`), or an error naming what is wrong with the header.
StatusOr<size_t> LabelColumn(const std::string& path, const std::vector<std::string>& header,
                             const std::string& label, const CsvOptions& options) {
  auto at = std::find(header.begin(), header.end(), label);
  if (at == header.end()) {
    const std::string unlabelled = options.like.path.empty() ? "" :
        ": a table without labels (a test set's) is no db; predict its rows from Python with "
        "granary.load_table(\"" + path + "\", MODEL), MODEL the model train --save wrote on " + options.like.path;
    return Status::InvalidArgument(path + ": no column '" + label + "' for --label (" + ColumnsText(header, options) +
                                   ")" + OneColumnHint(header, options.delimiter) +
                                   (options.header ? NoHeaderHint(header) : "") + unlabelled);
  }
  std::map<std::string, size_t> named;  // column name -> its first column, 1-based
  for (size_t c = 0; c < header.size(); ++c) {
    if (IsIndexColumn(header, c)) continue;  // CsvColumns leaves it out
    if (header[c].empty()) {
      return Status::InvalidArgument(path + ": column " + std::to_string(c + 1) + " of " +
                                     std::to_string(header.size()) + " has no name" +
                                     (c + 1 == header.size() ? " (a trailing comma on the header line?)" : ""));
    }
    const auto [first, fresh] = named.emplace(header[c], c + 1);
    if (!fresh && header[c] != label) {
      return Status::InvalidArgument(path + ": columns " + std::to_string(first->second) + " and " +
                                     std::to_string(c + 1) + " are both named '" + header[c] + "'; rename one");
    }
  }
  const size_t column = static_cast<size_t>(at - header.begin());
  if (auto again = std::find(at + 1, header.end(), label); again != header.end()) {
    return Status::InvalidArgument(path + ": --label " + label + ": the header has the column twice (" +
                                   std::to_string(column + 1) + " and " + std::to_string(again - header.begin() + 1) +
                                   "); rename one");
  }
  if (header.size() < 2) return Status::InvalidArgument(path + ": no feature columns besides the label");
  return column;
}

// The tables of `raw`, (split, path) each, train first: a folder's
// train.csv (val.csv, test.csv; or .tsv, compressed), or the file itself;
// refused where --val-fraction would make a val split beside a val file.
StatusOr<std::vector<std::pair<std::string, std::string>>> CsvFilesOf(const std::string& raw,
                                                                      const CsvOptions& options) {
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> files;
  if (fs::is_directory(raw, ec)) {
    for (const char* name : {"train", "val", "test"}) {
      for (const char* extension : kCsvFolderExtensions) {
        const fs::path p = fs::path(raw) / (std::string(name) + extension);
        if (fs::is_regular_file(p, ec)) {
          files.emplace_back(name, p.string());
          break;
        }
      }
    }
    if (files.empty() || files[0].first != "train") {
      return Status::NotFound(raw + ": no train.csv[.gz|.zst] or train.tsv (optionally with val.csv or test.csv)");
    }
  } else {
    files.emplace_back("train", raw);
  }
  // The train file's held-out rows are split "val", where no file is.
  const auto val_file = std::find_if(files.begin(), files.end(), [](const auto& f) { return f.first == "val"; });
  if (options.val_fraction > 0 && val_file != files.end()) {
    return Status::InvalidArgument("--val-fraction: " + val_file->second + " is the val split already");
  }
  return files;
}

// The CSV table(s) at `raw`, scanned: a file (split train), or a folder's
// train.csv with val.csv and test.csv if present, each with the first's header.
StatusOr<std::vector<CsvInput>> ScanCsvFiles(const std::string& raw, const CsvOptions& options,
                                             size_t* label_column, std::string* label,
                                             std::vector<std::string>* notes) {
  GRANARY_ASSIGN_OR_RETURN(const auto files, CsvFilesOf(raw, options));
  const auto test = std::find_if(files.begin(), files.end(), [](const auto& f) { return f.first == "test"; });
  const std::string test_file = test == files.end() ? "" : test->second;
  std::vector<CsvInput> inputs;
  std::set<std::string> values;
  for (const auto& file : files) {
    const std::string& path = file.second;  // a variable, not a binding: lambdas capture it
    CsvInput input;
    input.name = file.first;
    size_t columns = 0;  // the header's
    bool unlabelled = false;  // the train file's columns without its label (Kaggle's test.csv)
    const bool arff = StartsArff(PeekText(path, 64 << 10));
    const auto on_header = [&](const std::vector<std::string>& header) -> StatusOr<size_t> {
      columns = header.size();
      if (!inputs.empty()) {
        if (ColumnOnlyIn(inputs[0].table->header(), header) == *label) {
          unlabelled = true;
          return Status::FailedPrecondition("unlabelled");  // ends the scan: the file is left out
        }
        if (header != inputs[0].table->header()) {
          return Status::InvalidArgument(path + ": header differs from " + inputs[0].table->path() + "'s");
        }
        return *label_column;
      }
      *label = options.label;
      if (label->empty() && arff && ColumnsNamedLikeALabel(header).empty()) {
        *label = header.back();  // Weka's class attribute: the last
      } else if (label->empty()) {
        StatusOr<std::string> named = LabelNamed(path, header, options);
        const std::string lacked =
            named.ok() || test_file.empty() ? "" : ColumnOnlyIn(header, PeekCsvHeader(test_file, options.delimiter));
        if (!named.ok() && lacked.empty()) return named.status();
        *label = named.ok() ? named.value() : lacked;
      }
      GRANARY_ASSIGN_OR_RETURN(*label_column, LabelColumn(path, header, *label, options));
      return *label_column;
    };
    const auto on_row = [&](const CsvParser::Row& row, int part) -> Status {
      const std::string value = row.fields->empty() ? "" : TrimCsvField(row.fields->front());
      if (row.columns != columns || IsMissingCsvValue(value)) {
        ++input.unlabelled[part];
        return Status::OK();
      }
      if (options.regression) {  // counted before the table's decimal mark is known: either is a value
        float target = 0;
        const bool valued = ParseCsvNumber(*label, value, &target).ok() ||
                            (options.decimal != '.' && ParseCsvNumber(*label, value, &target, ',').ok());
        ++(valued ? input.valued : input.unlabelled)[part];
        return Status::OK();
      }
      auto [at, fresh] = input.labels.try_emplace(value, std::array<uint64_t, 2>{0, 0});
      ++at->second[part];
      if (fresh && values.insert(value).second && values.size() > kMaxLabelValues) {
        return Status::InvalidArgument(path + ":" + std::to_string(row.line) + ": column '" + *label +
                                       "' holds over " + std::to_string(kMaxLabelValues) +
                                       " distinct values: prep reads class labels (integers or names)" +
                                       RegressionHint(value));
      }
      return Status::OK();
    };
    // The other files are read with the first's delimiter, as they have its header.
    const char delimiter = inputs.empty() ? options.delimiter : inputs[0].table->delimiter();
    const char decimal = inputs.empty() ? options.decimal : inputs[0].table->decimal();
    const double val_fraction = input.name == "train" ? options.val_fraction : 0;
    StatusOr<std::shared_ptr<const CsvTable>> table = CsvTable::Scan(
        path, {val_fraction, delimiter, decimal, options.header, options.temp_dir, options.show_progress}, on_header,
        on_row);
    if (unlabelled) {
      notes->push_back(path + ": " + inputs[0].table->path() + "'s columns without its label '" + *label +
                       "' (a test set without labels, as Kaggle ships them): left out" +
                       (options.val_fraction > 0 ? "" : "; --val-fraction F holds out a val split of the train rows"));
      continue;
    }
    if (!table.ok()) return table.status();
    input.table = std::move(table).value();
    inputs.push_back(std::move(input));
  }
  return inputs;
}

// For --limit: the positions in each part of `input` that a stratified
// subset of `limit` keeps (StratifiedShares of the rows' classes, each
// class's first rows), by a second pass over the file. Rows that will be
// rejected count as a class of their own (-1), as with images; a regression
// target's rows (`classes` null) are one class.
StatusOr<std::array<std::vector<uint64_t>, 2>> KeepStratifiedRows(const CsvInput& input, size_t label_column,
                                                                   const std::map<std::string, int64_t>* classes,
                                                                   uint64_t limit) {
  std::array<std::map<int64_t, uint64_t>, 2> share;
  for (int part : {0, 1}) {
    std::map<int64_t, uint64_t> count;
    if (input.unlabelled[part] > 0) count[-1] = input.unlabelled[part];
    if (input.valued[part] > 0) count[0] = input.valued[part];
    for (const auto& [value, rows] : input.labels) count[classes->at(value)] += rows[part];
    share[part] = StratifiedShares(count, input.table->rows(part), limit);
  }
  const size_t columns = input.table->header().size();
  const auto class_of = [&](const std::string& value) -> int64_t {
    float target = 0;
    if (classes == nullptr) return ParseCsvNumber("", value, &target, input.table->decimal()).ok() ? 0 : -1;
    const auto found = classes->find(value);
    return found == classes->end() ? -1 : found->second;
  };
  std::array<std::vector<uint64_t>, 2> kept;
  uint64_t seen[2] = {0, 0};
  GRANARY_RETURN_IF_ERROR(input.table->ForEachRow(label_column, [&](const CsvParser::Row& row, int part) {
    const std::string value = row.fields->empty() ? "" : TrimCsvField(row.fields->front());
    const int64_t label = row.columns == columns ? class_of(value) : -1;
    if (uint64_t& left = share[part][label]; left > 0) {
      kept[part].push_back(seen[part]);
      --left;
    }
    ++seen[part];
    return Status::OK();
  }));
  return kept;
}

// The label values of the tables after the first (test.csv, val.csv) that
// are the first's with a '.' after them (ClassWithoutPeriod: UCI's
// adult.test), each with the first's value; noted.
std::map<std::string, std::string> LabelsWithAPeriod(const std::vector<CsvInput>& inputs,
                                                      std::vector<std::string>* notes) {
  std::set<std::string> first;
  for (const auto& [value, rows] : inputs[0].labels) first.insert(value);
  std::map<std::string, std::string> all;
  for (size_t i = 1; i < inputs.size(); ++i) {
    std::map<std::string, std::string> read_as;
    for (const auto& [value, rows] : inputs[i].labels) {
      if (const std::string of = ClassWithoutPeriod(value, first); !of.empty()) read_as.emplace(value, of);
    }
    if (read_as.empty()) continue;
    notes->push_back(inputs[i].table->path() + ": labels " + PeriodNote(read_as) + ", " +
                     inputs[0].table->path() + "'s");
    all.insert(read_as.begin(), read_as.end());
  }
  return all;
}

// What was found rather than given is noted, and recorded as if given (a
// later build that finds the same is up to date with this one): the label
// column, the delimiter; and which files were read decompressed.
void NoteWhatWasFound(const std::vector<CsvInput>& inputs, const CsvOptions& options, const std::string& label,
                      SourceInfo* info) {
  if (options.label.empty()) {
    const std::vector<std::string> named = ColumnsNamedLikeALabel(inputs[0].table->header());
    const bool by_name = std::find(named.begin(), named.end(), label) != named.end();
    const std::string found = by_name                     ? "the column named like a label"
                              : inputs[0].table->arff() ? "the ARFF file's last attribute, Weka's class"
                                                        : "the column test.csv lacks";
    info->notes.push_back("label column '" + label + "' (" + found + "; --label picks another)");
    info->options["label"] = label;
  }
  for (const CsvInput& input : inputs) {
    NoteLinesLeftOut(*input.table, &info->notes);
    if (!input.table->compression().empty()) {
      char size[32];
      std::snprintf(size, sizeof(size), "%.1f MB", static_cast<double>(input.table->bytes()) / 1e6);
      info->notes.push_back(input.table->path() + ": " + input.table->compression() + ", read from a " + size +
                            " decompressed copy in " + options.temp_dir + " ($TMPDIR), which nothing keeps");
    }
  }
  if (inputs[0].table->decimal() == ',') {
    if (options.decimal == 0) {
      info->notes.push_back("numbers written with a decimal comma (1,5: as spreadsheets save CSV in many locales), "
                            "read so (--decimal point reads them otherwise)");
    }
    info->options["decimal"] = "comma";
  }
  const char delimiter = inputs[0].table->delimiter();
  if (delimiter != ',') {
    if (options.delimiter == 0) {
      info->notes.push_back("columns separated by " + QuotedCsvDelimiter(delimiter) +
                            " (found in the header; --delimiter gives another)");
    }
    info->options["delimiter"] = CsvDelimiterName(delimiter);
  }
}

}  // namespace

StatusOr<Source> OpenCsvSource(const std::string& raw, const CsvOptions& options) {
  std::error_code ec;
  if (!fs::exists(raw, ec)) return Status::NotFound(raw + ": no such file or folder");
  size_t label_column = 0;
  std::string label;
  Source source;
  GRANARY_ASSIGN_OR_RETURN(std::vector<CsvInput> inputs,
                           ScanCsvFiles(raw, options, &label_column, &label, &source.info.notes));

  NoteWhatWasFound(inputs, options, label, &source.info);
  std::vector<const CsvTable*> tables;
  for (const CsvInput& input : inputs) tables.push_back(input.table.get());
  GRANARY_ASSIGN_OR_RETURN(CsvColumns planned,
                           options.like.path.empty()
                               ? CsvColumns::Plan(tables, label_column, options.drop, &source.info.notes)
                               : CsvColumns::PlanLike(tables, label_column, options.like, &source.info.notes));
  const auto columns = std::make_shared<const CsvColumns>(std::move(planned));
  if (!options.drop.empty()) {  // recorded in order: the same columns given in another order are the same build
    const std::set<std::string> sorted(options.drop.begin(), options.drop.end());
    std::string dropped;
    for (const std::string& name : sorted) dropped += (dropped.empty() ? "" : ",") + name;
    source.info.options["drop"] = dropped;
  }
  const std::map<std::string, std::string> read_as = LabelsWithAPeriod(inputs, &source.info.notes);
  std::set<std::string> values;
  uint64_t labelled = 0;
  for (const CsvInput& input : inputs) {
    for (const auto& [value, rows] : input.labels) {
      if (read_as.count(value) == 0) values.insert(value);
      labelled += rows[0] + rows[1];
    }
  }
  std::shared_ptr<const std::map<std::string, int64_t>> classes;
  if (!options.regression) {
    std::map<std::string, int64_t> chosen;
    if (!options.like.path.empty()) {
      chosen = ClassesLike(options.like, label, values, &source.info.class_names, &source.info.notes);
    } else {
      GRANARY_RETURN_IF_ERROR(CheckClassLabels(inputs[0].table->path(), label, values, labelled, /*table=*/true,
                                               &source.info.notes));
      chosen = ChooseClasses(values, &source.info.class_names);
    }
    for (const auto& [value, of] : read_as) {
      if (const auto found = chosen.find(of); found != chosen.end()) chosen.emplace(value, found->second);
    }
    classes = std::make_shared<const std::map<std::string, int64_t>>(std::move(chosen));
  } else {
    source.info.notes.push_back("column '" + label + "' is the regression target (--regression): field 'target', "
                                "float32");
  }
  source.info.kind = "csv";
  source.info.path = raw;
  source.info.label_field = options.regression ? "target" : "label";
  source.info.num_classes = static_cast<int64_t>(source.info.class_names.size());
  source.info.schema.fields = {
      {"features", DType::kFloat32, {static_cast<int64_t>(columns->elements())}, ""},
      options.regression ? FieldSpec{"target", DType::kFloat32, {}, ""} : FieldSpec{"label", DType::kInt64, {}, ""}};
  source.info.element_names["features"] = columns->element_names();
  if (options.regression) source.info.element_names["target"] = {label};

  for (const CsvInput& input : inputs) {
    const bool held_out = input.name == "train" && options.val_fraction > 0;
    std::array<std::vector<uint64_t>, 2> kept;
    bool subset[2] = {false, false};
    for (int part : {0, 1}) subset[part] = options.limit > 0 && input.table->rows(part) > options.limit;
    if (subset[0] || subset[1]) {
      GRANARY_ASSIGN_OR_RETURN(kept, KeepStratifiedRows(input, label_column, classes.get(), options.limit));
    }
    for (int part = 0; part < (held_out ? 2 : 1); ++part) {
      const std::string name = held_out ? (part == 0 ? "train" : "val") : input.name;
      source.splits.push_back(std::make_unique<CsvSplit>(name, input.table, part, std::move(kept[part]),
                                                         subset[part], label_column, classes, columns, options.missing,
                                                         part == 0 ? input.table->bytes() : 0));
    }
  }
  return source;
}

}  // namespace granary
