// A table's rows as the features a saved model reads (granary.load_table):
// for predictions on rows that have no db, as Kaggle's test.csv has none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

struct EncodedTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each data row's fields, trimmed, in the file's order
  std::vector<float> features;                 // rows x the names' count, row-major
  // Column -> the values of it taken as missing (NaN): absent, or none of
  // its categories (counted apart, in `unseen`).
  std::map<std::string, uint64_t> missing, unseen;
  std::vector<std::string> notes;  // columns left out, values none of the categories
};

// Every data row of the CSV file at `path` (gzip or zstd too, decompressed
// into `temp_dir`), its features made as a db whose feature names are
// `names` (a model's card's input_names: "column" or "column=value") made
// them (preprocess/csv_columns.h, PlanLike), `who` naming where they come
// from in messages ("model m.pt"). A missing value, or a text value none of
// its column's categories, is NaN (a model train saved takes it as its
// feature's mean). A table without a header is read so where `names` are
// numbered columns ("1", "2=red": a db built --no-header) and its first row
// names no column "1"; a LIBSVM file (LooksLikeSvmlight) where they are its
// indices, each row its label. InvalidArgument naming the file (and line): a
// column of `names` missing from the header, a row of another field count,
// a value that is no number.
StatusOr<EncodedTable> EncodeTable(const std::string& path, const std::vector<std::string>& names,
                                   const std::string& who, const std::string& temp_dir);

}  // namespace granary
