// CSV files read without holding them: one streaming pass finds the header and
// where each block of rows starts (and shows the caller each row's label
// column); a row is read back later from its block, so memory does not grow
// with the file. Internal to preprocess (preprocess/csv_source.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/file.h"
#include "base/status.h"
#include "preprocess/csv_layout.h"

namespace granary {

class ProgressLine;

// The delimiter of a table whose fields are separated by runs of spaces and
// tabs (numpy.savetxt's default, UCI's housing.data; pandas' sep=r"\s+"):
// spaces and tabs at a line's start and end are no fields.
inline constexpr char kWhitespaceDelimiter = ' ';

// Splits CSV text, fed in consecutive pieces, into rows of fields. RFC 4180:
// comma separated (or by another delimiter: SetDelimiter), fields may be double-quoted (with "" for a quote and
// commas or newlines inside; spaces before an opening quote are dropped);
// CRLF, LF or (old Mac OS) CR line ends; blank lines are no rows. Fields are
// kept as they are (the caller trims them).
class CsvParser {
 public:
  struct Row {
    uint64_t line = 0;    // 1-based line where the row starts
    uint64_t offset = 0;  // of its first byte, counted from where the parser started
    size_t columns = 0;   // fields in the row
    // The fields kept (Keep): all of them, the one column's (absent if the
    // row is shorter), or none.
    const std::vector<std::string>* fields = nullptr;
  };
  static constexpr size_t kAllColumns = SIZE_MAX;
  static constexpr size_t kNoColumn = SIZE_MAX - 1;

  // Starts at line `line`, byte `offset`, outside any row; keeps every field.
  void Reset(uint64_t line = 1, uint64_t offset = 0);
  // Which fields rows keep from now on: kAllColumns, kNoColumn or one column.
  void Keep(size_t column) { keep_ = column; }
  // The byte between fields (',' unless set: ';', '\t', '|', kWhitespaceDelimiter).
  void SetDelimiter(char delimiter) { delimiter_ = delimiter; }
  // ARFF's data (Weka, OpenML): a field may be quoted with ' as well, and a
  // line starting with '%' is a comment, no row.
  void SetArff(bool arff) { arff_ = arff; }
  // Parses `text`, calling on_row for each row it completes; a non-OK status
  // from on_row ends the parse and is returned.
  Status Feed(std::string_view text, const std::function<Status(const Row&)>& on_row);
  // The input ended: completes the last row; InvalidArgument naming
  // origin:line if a quoted field is still open.
  Status End(const std::string& origin, const std::function<Status(const Row&)>& on_row);
  // Bytes since the row being parsed began (0 between rows).
  uint64_t open_row_bytes() const { return row_started_ ? offset_ - row_offset_ : 0; }

 private:
  void EndField();
  Status EndRow(const std::function<Status(const Row&)>& on_row);

  size_t keep_ = kAllColumns;
  char delimiter_ = ',';
  uint64_t line_ = 1, offset_ = 0;
  bool quoted_ = false, quote_pending_ = false, cr_pending_ = false;
  bool row_started_ = false, field_blank_ = true;
  bool gap_ = false;  // whitespace-delimited: spaces after a field, which end it if another follows
  bool arff_ = false, comment_ = false;
  char quote_ = '"';  // the one the quoted field opened with
  uint64_t row_line_ = 0, row_offset_ = 0;
  size_t column_ = 0;
  std::string field_;
  std::vector<std::string> fields_;
};

// A field without the spaces and tabs around it (CSV fields are trimmed
// after parsing: a header, a label, a number).
std::string TrimCsvField(const std::string& field);

// Whether column `c` of `header` is the index pandas' to_csv writes unless
// told index=False (R's write.csv: its row names): a first column without a
// name, with a label and a feature beside it. Row numbers, no feature.
inline bool IsIndexColumn(const std::vector<std::string>& header, size_t c) {
  return c == 0 && header.size() > 2 && header[0].empty();
}

// How a folder's tables are named after their split (train.csv, ...),
// the uncompressed first: the first there is read.
inline constexpr const char* kCsvFolderExtensions[] = {".csv", ".csv.gz", ".csv.zst", ".tsv", ".tsv.gz", ".tsv.zst"};

// `v` as a whole decimal or scientific number, as strtod reads one but not
// hexadecimal ("0x1b"), into *x; false if it is empty or anything is left
// over. inf and nan are read: a caller that takes only finite values checks.
bool ParseDecimal(const std::string& v, double* x);

// "'a', 'b', ... (N in all)": a header's first columns, for a message.
std::string CsvHeaderText(const std::vector<std::string>& header);

// How CsvTable::Scan reads a file.
struct CsvScanOptions {
  double val_fraction = 0;  // rows HeldOut at it are part 1
  char delimiter = 0;       // between fields; 0: as DetectCsvDelimiter finds it in the header
  char decimal = 0;         // '.' or ','; 0: as DetectCsvDecimal finds it in the first rows
  bool header = true;       // false: the first row is data, its columns named "1", "2", ...
  std::string temp_dir = "/tmp";  // where a compressed file's decompressed copy is made (prep's $TMPDIR)
  // A progress line on stderr while a file of kProgressBytes or more is
  // decompressed and scanned (prep on a terminal).
  bool show_progress = false;
};

// A CSV file's data rows, each in one of two parts (the rows a hash of their
// line puts in a held-out split, and the others), read back by part and
// position. Thread-safe after Scan.
class CsvTable {
 public:
  // The longest row read: a longer one is refused (an unterminated quote
  // would otherwise make the rest of a file one row held in memory).
  static constexpr uint64_t kMaxRowBytes = 64 << 20;
  // The smallest file (compressed, when decompressed) whose reading shows a progress line.
  static constexpr uint64_t kProgressBytes = 32 << 20;

  // Reads `path` once, in pieces (a gzip or zstd file decompressed first,
  // into options.temp_dir), its fields split at options.delimiter. The
  // header row's fields (trimmed; without options.header, "1", "2", ... for
  // the first row's columns, and that row is data) go to on_header, which
  // returns the column every data row keeps for on_row (kNoColumn, or an
  // error that ends the scan). A row is in part 1 where
  // HeldOut(options.val_fraction, its line), else part 0. Errors name the
  // file: it is not a regular file, is UTF-16, compressed otherwise, an
  // archive or not text, has no header or no data rows, a row longer than
  // kMaxRowBytes, an unterminated quoted field.
  static StatusOr<std::shared_ptr<const CsvTable>> Scan(
      const std::string& path, const CsvScanOptions& options,
      const std::function<StatusOr<size_t>(const std::vector<std::string>& header)>& on_header,
      const std::function<Status(const CsvParser::Row&, int part)>& on_row);

  // Whether the row starting at `line` is held out at `fraction`.
  static bool HeldOut(double fraction, uint64_t line);

  const std::string& path() const { return path_; }
  // "gzip" or "zstd" for a compressed file (read from an unnamed decompressed
  // copy in the scan's temp_dir, which bytes() measures), else "".
  const std::string& compression() const { return compression_; }
  char delimiter() const { return delimiter_; }
  // Its numbers' decimal mark, '.' or ',' (CsvScanOptions::decimal).
  char decimal() const { return decimal_; }
  uint64_t bytes() const { return file_.size_bytes(); }
  const std::vector<std::string>& header() const { return header_; }
  // The lines before the header that were no rows of it (LinesBeforeTheTable), left out.
  const std::vector<std::string>& lines_left_out() const { return lines_left_out_; }
  // Whether the header began with numpy.savetxt's comment mark ("# a,b,label"), left out.
  bool header_commented() const { return header_commented_; }
  // Whether its rows have one field more than its header (R's write.table: each row's name first), which
  // header() then names "" (IsIndexColumn: left out).
  bool row_names() const { return row_names_; }
  // Whether it is an ARFF file (Weka's; OpenML serves datasets so): its header
  // the @attribute names, its rows those after @data, '%' lines comments.
  bool arff() const { return arff_; }
  uint64_t rows(int part) const { return part_rows_[part]; }

  // Every data row again, in order, keeping `column` (as Scan).
  Status ForEachRow(size_t column, const std::function<Status(const CsvParser::Row&, int part)>& on_row) const;
  // The fields of the `nth` row of `part` (all of them, untrimmed) and the
  // line it starts at (only the line if `fields` is null). IOError or
  // Corruption naming the file if it changed since the scan. nth < rows(part).
  Status ReadRow(int part, uint64_t nth, std::vector<std::string>* fields, uint64_t* line) const;

 private:
  // Rows from `offset` (a row's first byte, at `line`) to the next block's
  // offset: about kBlockBytes of the file.
  struct Block {
    uint64_t offset = 0;
    uint64_t line = 0;
    uint64_t before[2] = {0, 0};  // rows of each part before this block
  };
  // A block read back: its text and each row's start, line and part.
  struct Loaded {
    std::string text;
    std::vector<uint32_t> begin;  // into text; one past the last row: text.size()
    std::vector<uint64_t> line;
    std::vector<uint32_t> of_part[2];  // the rows of each part, in order
  };
  static constexpr uint64_t kBlockBytes = 256 << 10;
  static constexpr size_t kCachedBlocks = 8;

  // Parses the file from `offset` (a row's first byte, at `line`) to its
  // end in pieces, rows keeping *column (read after each row: the header's
  // callback chooses it).
  Status ScanRows(uint64_t offset, uint64_t line, const size_t* column,
                  const std::function<Status(const CsvParser::Row&, int part)>& on_row,
                  ProgressLine* progress = nullptr) const;
  int PartOf(uint64_t line) const;
  // Where file_ is compressed: file_ becomes its decompressed copy in
  // `temp_dir` (a progress line shown while a large file is decompressed, if
  // `show_progress`). InvalidArgument for a compression prep does not read.
  Status Decompress(const std::string& temp_dir, bool show_progress);
  // InvalidArgument, with how to save it as CSV, where the zip file_ is an
  // Excel or OpenDocument workbook.
  Status RefuseSpreadsheet() const;
  // The block, from the cache or read (Read) by the first thread to ask.
  StatusOr<std::shared_ptr<const Loaded>> Load(size_t block) const;
  Status Read(size_t block, std::shared_ptr<const Loaded>* out) const;
  uint64_t BlockEnd(size_t block) const;

  std::string path_;
  ReadOnlyFile file_;
  std::string compression_;
  double val_fraction_ = 0;
  char delimiter_ = ',';
  char decimal_ = '.';
  std::vector<std::string> header_;
  std::vector<std::string> lines_left_out_;
  bool header_commented_ = false;
  bool row_names_ = false;
  bool arff_ = false;
  uint64_t part_rows_[2] = {0, 0};
  std::vector<Block> blocks_;

  // The blocks read back most recently; Load fills each once.
  struct Slot {
    size_t block = 0;
    std::once_flag once;
    Status status;
    std::shared_ptr<const Loaded> loaded;
  };
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<Slot>> cache_;  // most recent last
};

}  // namespace granary
