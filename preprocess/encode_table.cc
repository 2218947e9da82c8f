#include "preprocess/encode_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "preprocess/csv_columns.h"
#include "preprocess/csv_table.h"
#include "preprocess/source.h"

namespace granary {

namespace {

// Whether each of `names` is a numbered column's ("3", "2=Private"): the
// features of a table built --no-header.
bool NumberedColumns(const std::vector<std::string>& names) {
  return !names.empty() && std::all_of(names.begin(), names.end(), [](const std::string& name) {
    const std::string column = name.substr(0, name.find('='));
    return !column.empty() && column.find_first_not_of("0123456789") == std::string::npos;
  });
}

// The lines of the LIBSVM file at `path` as the features `names` (a LIBSVM
// db's indices) and each line's label: a row each, its one field the label.
StatusOr<EncodedTable> EncodeSvmlight(const std::string& path, const std::vector<std::string>& names,
                                      const std::string& who, const std::string& temp_dir) {
  CsvOptions options;
  options.regression = true;  // the label as it is written, no class
  options.temp_dir = temp_dir;
  options.like.path = path;
  options.like.named = who;
  options.like.feature_names = names;
  GRANARY_ASSIGN_OR_RETURN(const Source source, OpenSvmlightSource(path, options));
  const SplitSource& lines = *source.splits[0];
  EncodedTable out;
  out.header = {"label"};
  Sample sample;
  for (uint64_t i = 0; i < lines.size(); ++i) {
    if (Status produced = lines.Produce(i, &sample); !produced.ok()) {
      return Status::InvalidArgument(lines.ItemName(i) + ": " + produced.message());
    }
    const size_t at = out.features.size();
    out.features.resize(at + sample.fields[0].size() / sizeof(float));
    std::memcpy(out.features.data() + at, sample.fields[0].data(), sample.fields[0].size());
    float label = 0;
    std::memcpy(&label, sample.fields[1].data(), sizeof(label));
    char text[32];
    std::snprintf(text, sizeof(text), "%g", label);
    out.rows.push_back({text});
  }
  return out;
}

// The CSV table at `path`, scanned, its first row its header (or, with
// `header` false, data: its columns numbered 1..N).
StatusOr<std::shared_ptr<const CsvTable>> ScanTable(const std::string& path, const std::string& temp_dir,
                                                    bool header) {
  CsvScanOptions scan;
  scan.temp_dir = temp_dir;
  scan.header = header;
  return CsvTable::Scan(
      path, scan, [](const std::vector<std::string>&) -> StatusOr<size_t> { return CsvParser::kNoColumn; },
      [](const CsvParser::Row&, int) { return Status::OK(); });
}

}  // namespace

StatusOr<EncodedTable> EncodeTable(const std::string& path, const std::vector<std::string>& names,
                                   const std::string& who, const std::string& temp_dir) {
  if (LooksLikeSvmlight(PeekText(path, 64 << 10))) return EncodeSvmlight(path, names, who, temp_dir);
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const CsvTable> table, ScanTable(path, temp_dir, /*header=*/true));
  EncodedTable out;
  const std::vector<std::string>& first = table->header();
  if (NumberedColumns(names) && std::find(first.begin(), first.end(), "1") == first.end()) {
    GRANARY_ASSIGN_OR_RETURN(table, ScanTable(path, temp_dir, /*header=*/false));
    out.notes.push_back(path + ": read without a header, its columns numbered 1.." +
                        std::to_string(table->header().size()) + ", as " + who + "'s db was built (--no-header)");
  }
  NoteLinesLeftOut(*table, &out.notes);
  out.header = table->header();
  LikeDb like;
  like.named = who;
  like.feature_names = names;
  GRANARY_ASSIGN_OR_RETURN(CsvColumns columns,
                           CsvColumns::PlanLike({table.get()}, out.header.size(), like, &out.notes));
  std::string features;
  CsvColumns::MissingCounts counts{std::vector<uint64_t>(out.header.size()), std::vector<uint64_t>(out.header.size())};
  Status read = table->ForEachRow(CsvParser::kAllColumns, [&](const CsvParser::Row& row, int) -> Status {
    const std::string at = path + ":" + std::to_string(row.line);
    if (row.columns != out.header.size()) {
      return Status::InvalidArgument(at + ": " + std::to_string(row.columns) + " fields, the header has " +
                                     std::to_string(out.header.size()));
    }
    features.clear();
    GRANARY_RETURN_IF_ERROR(columns.Append(*row.fields, MissingPolicy::kNaN, &features, &counts).WithContext(at));
    std::vector<std::string> fields;
    for (const std::string& field : *row.fields) fields.push_back(TrimCsvField(field));
    const size_t at_end = out.features.size();
    out.features.resize(at_end + features.size() / sizeof(float));
    std::memcpy(out.features.data() + at_end, features.data(), features.size());
    out.rows.push_back(std::move(fields));
    return Status::OK();
  });
  GRANARY_RETURN_IF_ERROR(read);
  for (size_t c = 0; c < out.header.size(); ++c) {
    if (counts.absent[c] > 0) out.missing[out.header[c]] = counts.absent[c];
    if (counts.unseen[c] > 0) out.unseen[out.header[c]] = counts.unseen[c];
  }
  return out;
}

}  // namespace granary
