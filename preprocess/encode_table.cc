#include "preprocess/encode_table.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "preprocess/csv_columns.h"
#include "preprocess/csv_table.h"

namespace granary {

StatusOr<EncodedTable> EncodeTable(const std::string& path, const std::vector<std::string>& names,
                                   const std::string& who, const std::string& temp_dir) {
  CsvScanOptions scan;
  scan.temp_dir = temp_dir;
  GRANARY_ASSIGN_OR_RETURN(
      std::shared_ptr<const CsvTable> table,
      CsvTable::Scan(
          path, scan, [](const std::vector<std::string>&) -> StatusOr<size_t> { return CsvParser::kNoColumn; },
          [](const CsvParser::Row&, int) { return Status::OK(); }));
  EncodedTable out;
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
