// How a CSV table's columns become its `features` field: each column but the
// label is a number (one float32), text (one-hot: one float32 for each of its
// distinct values, as pandas.get_dummies encodes it) or left out (--drop).
// Internal to preprocess (preprocess/csv_source.cc).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "preprocess/csv_table.h"
#include "preprocess/source.h"

namespace granary {

// Empty, NA, N/A, NaN, nan, null, NULL or ?: a missing value (--missing).
bool IsMissingCsvValue(const std::string& value);

// How a row missing a feature's value is rejected (--missing reject):
// "column 'age': missing value".
inline constexpr char kMissingValue[] = "': missing value";

// A value of column `column` (trimmed) as a float32 number, into *out:
// InvalidArgument naming the column and value where it is missing or no
// number float32 can hold (with what it looks like: a decimal comma,
// thousands separators, hexadecimal). A regression target is read so.
// With `decimal` ',' the value's one comma is its decimal mark ("1,5").
Status ParseCsvNumber(const std::string& column, const std::string& value, float* out, char decimal = '.');

// A text column with more distinct values than this is refused (an id, a
// name, free text: one-hot encoding would make a feature of each).
inline constexpr size_t kMaxCategories = 100;

class CsvColumns {
 public:
  // The columns of `tables` (one header; the first is the training table),
  // labelled by `label_column`: those named in `drop` left out, each other one
  // a number unless most of its values present in the first table's first
  // rows are not numbers (it is text: its categories are then the sorted
  // distinct values of all tables' rows, by one more pass over each).
  // InvalidArgument naming the file: a dropped column that is not in the
  // header or is the label, no feature left, a text column of over
  // kMaxCategories values (at the line where it passes them). What was
  // decided goes to `notes`.
  static StatusOr<CsvColumns> Plan(const std::vector<const CsvTable*>& tables, size_t label_column,
                                   const std::vector<std::string>& drop, std::vector<std::string>* notes);

  // The columns of `tables` as --like's db made them features (`like`: its
  // feature names, "column" or "column=value", in order): each of its
  // columns a number or a text column of its categories, in its order,
  // whatever the order of this header's; the label's and other columns left
  // out (noted). InvalidArgument naming the file and the column where a
  // column of `like`'s is not in the header. A text value that is none of
  // `like`'s categories is a missing value (Append), and each column's
  // are counted and noted, by one pass over each table.
  static StatusOr<CsvColumns> PlanLike(const std::vector<const CsvTable*>& tables, size_t label_column,
                                       const LikeDb& like, std::vector<std::string>* notes);

  // float32 elements of a row's features.
  size_t elements() const { return names_.size(); }
  // Each element's name: the column's, or "column=value" for a category.
  const std::vector<std::string>& element_names() const { return names_; }

  // Appends a row's features (`fields`: all of its fields, untrimmed, as many
  // as the header's) to *features. InvalidArgument naming the column and
  // value: a number float32 cannot hold, a missing value under kReject (and,
  // planned like a db, a text value none of its categories). With `counts`,
  // the values taken as missing are counted there by header column.
  struct MissingCounts {
    std::vector<uint64_t> absent;  // empty, NA, ...
    std::vector<uint64_t> unseen;  // planned like a db: none of its categories
  };
  Status Append(const std::vector<std::string>& fields, MissingPolicy missing, std::string* features,
                MissingCounts* counts = nullptr) const;

 private:
  enum class Kind { kNumber, kText, kLeftOut };
  struct Column {
    std::string name;
    Kind kind = Kind::kNumber;
    std::map<std::string, uint32_t> categories;  // kText: value -> its place among the sorted values
  };
  std::vector<Column> columns_;  // one per header column; the label's is left out
  std::vector<size_t> order_;    // the columns whose elements a row's features are, in their order
  std::vector<std::string> names_;
  std::string like_;  // --like's db: a text value none of its categories is a missing value
  char decimal_ = '.';  // the first table's decimal mark
};

}  // namespace granary
