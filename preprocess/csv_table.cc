#include "preprocess/csv_table.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>

#include "base/file.h"
#include "base/json_text.h"
#include "preprocess/compressed_input.h"
#include "preprocess/folder_layout.h"
#include "preprocess/numpy_files.h"
#include "preprocess/progress.h"

namespace granary {

void CsvParser::Reset(uint64_t line, uint64_t offset) {
  keep_ = kAllColumns;
  line_ = line;
  offset_ = offset;
  quoted_ = quote_pending_ = cr_pending_ = row_started_ = gap_ = comment_ = false;
  quote_ = '"';
  field_blank_ = true;
  column_ = 0;
  field_.clear();
  fields_.clear();
}

void CsvParser::EndField() {
  if (keep_ == kAllColumns || keep_ == column_) fields_.push_back(field_);
  field_.clear();
  field_blank_ = true;
  ++column_;
}

Status CsvParser::EndRow(const std::function<Status(const Row&)>& on_row) {
  if (!row_started_) return Status::OK();
  EndField();
  Row row;
  row.line = row_line_;
  row.offset = row_offset_;
  row.columns = column_;
  row.fields = &fields_;
  Status status = on_row(row);
  row_started_ = false;
  column_ = 0;
  fields_.clear();
  return status;
}

Status CsvParser::Feed(std::string_view text, const std::function<Status(const Row&)>& on_row) {
  const bool keeping = keep_ != kNoColumn;
  for (size_t i = 0; i < text.size(); ++i, ++offset_) {
    const char c = text[i];
    if (cr_pending_) {  // CRLF is one line end
      cr_pending_ = false;
      if (c == '\n') continue;
    }
    if (comment_) {  // ARFF: a line starting with '%' is no row
      if (c == '\n' || c == '\r') {
        comment_ = false;
        ++line_;
        cr_pending_ = c == '\r';
      }
      continue;
    }
    if (quote_pending_) {  // a quote inside quotes: "" is a quote, else the field's quotes close
      quote_pending_ = false;
      if (c == quote_) {
        if (keeping) field_ += quote_;
        continue;
      }
      quoted_ = false;
    } else if (quoted_) {
      if (c == quote_) {
        quote_pending_ = true;
      } else {
        if (c == '\n') ++line_;
        if (keeping) field_ += c;
      }
      continue;
    }
    if (c == '\n' || c == '\r') {
      ++line_;
      cr_pending_ = c == '\r';
      gap_ = false;
      GRANARY_RETURN_IF_ERROR(EndRow(on_row));
      continue;
    }
    if (delimiter_ == kWhitespaceDelimiter && (c == ' ' || c == '\t')) {
      gap_ = row_started_;  // a run of them is one delimiter; those before a row's first field are none
      continue;
    }
    if (!row_started_ && arff_ && c == '%') {
      comment_ = true;
      continue;
    }
    if (!row_started_) {
      row_started_ = true;
      row_line_ = line_;
      row_offset_ = offset_;
    }
    if (gap_) {
      gap_ = false;
      EndField();
    }
    if (c == delimiter_) {
      EndField();
    } else if ((c == '"' || (arff_ && c == '\'')) && field_blank_) {
      quoted_ = true;  // spaces before an opening quote are dropped
      quote_ = c;
      field_.clear();
    } else {
      if (keeping) field_ += c;
      if (c != ' ' && c != '\t') field_blank_ = false;
    }
  }
  return Status::OK();
}

Status CsvParser::End(const std::string& origin, const std::function<Status(const Row&)>& on_row) {
  if (quote_pending_) quote_pending_ = quoted_ = false;  // the file ends with the closing quote
  if (quoted_) return Status::InvalidArgument(origin + ":" + std::to_string(row_line_) + ": unterminated quoted field");
  return EndRow(on_row);
}

std::string TrimCsvField(const std::string& field) {
  const size_t a = field.find_first_not_of(" \t"), b = field.find_last_not_of(" \t");
  return a == std::string::npos ? "" : field.substr(a, b - a + 1);
}

bool ParseDecimal(const std::string& v, double* x) {
  if (v.empty() || v.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  *x = std::strtod(v.c_str(), &end);
  return end == v.c_str() + v.size();
}

std::string CsvHeaderText(const std::vector<std::string>& header) {
  std::string text;
  for (size_t c = 0; c < header.size() && c < 12; ++c) text += (c > 0 ? ", '" : "'") + header[c] + "'";
  if (header.size() > 12) text += ", ... (" + std::to_string(header.size()) + " in all)";
  return text;
}

namespace {

// The lines `text` starts with (at most `most`; its last one even if cut
// short), without their line ends, and where the line after each starts.
struct TextLine {
  std::string_view text;
  size_t next = 0;
};
std::vector<TextLine> FirstLines(std::string_view text, size_t most) {
  std::vector<TextLine> lines;
  for (size_t at = 0; at < text.size() && lines.size() < most;) {
    size_t end = text.find('\n', at);
    const size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({line, next});
    at = next;
  }
  return lines;
}

// The fields of `line` (up to its first line end) between `delimiter`s
// outside quotes, or between runs of spaces and tabs (kWhitespaceDelimiter,
// a leading "#" field not counted).
size_t FieldsOf(std::string_view line, char delimiter) {
  size_t fields = delimiter == kWhitespaceDelimiter ? 0 : 1;
  bool quoted = false, in_field = false;
  for (size_t i = 0; i < line.size() && (quoted || (line[i] != '\n' && line[i] != '\r')); ++i) {
    const char c = line[i];
    if (c == '"') quoted = !quoted;  // "" inside quotes toggles twice
    if (delimiter != kWhitespaceDelimiter) {
      fields += !quoted && c == delimiter;
      continue;
    }
    const bool space = !quoted && (c == ' ' || c == '\t');
    const bool mark = c == '#' && fields == 0 && (i + 1 == line.size() || std::strchr(" \t\r\n", line[i + 1]));
    if (!space && !in_field) fields += !mark;
    in_field = !space;
  }
  return fields;
}

}  // namespace

char DetectCsvDelimiter(std::string_view text) {
  size_t counts[4] = {0, 0, 0, 0};
  const char kDelimiters[4] = {',', ';', '\t', '|'};
  for (int k = 0; k < 4; ++k) counts[k] = FieldsOf(text, kDelimiters[k]) - 1;
  if (counts[0] > 0) return ',';
  const size_t* most = std::max_element(counts + 1, counts + 4);
  if (*most > 0) return kDelimiters[most - counts];
  const std::vector<TextLine> lines = FirstLines(text, 2);
  const size_t fields = FieldsOf(text, kWhitespaceDelimiter);
  if (fields < 2 || lines.size() < 2) return ',';
  const size_t next = FieldsOf(lines[1].text, kWhitespaceDelimiter);  // R's write.table: each row's name first
  return next == fields || next == fields + 1 ? kWhitespaceDelimiter : ',';
}

LeadingLines LinesBeforeTheTable(std::string_view text, char delimiter) {
  constexpr size_t kMostLeftOut = 10, kAgreeing = 5;
  const std::vector<TextLine> lines = FirstLines(text, kMostLeftOut + kAgreeing);
  const std::string candidates = delimiter != 0 ? std::string(1, delimiter) : std::string(",;\t|");
  for (char d : candidates) {
    if (d == kWhitespaceDelimiter) break;
    for (size_t k = 1; k <= kMostLeftOut && k + 1 < lines.size(); ++k) {
      if (FieldsOf(lines[k - 1].text, d) != 1) break;  // a row of the table by d: nothing before it is left out
      const size_t n = FieldsOf(lines[k].text, d);
      bool agree = n >= 2;
      for (size_t j = k + 1; j < lines.size() && j < k + kAgreeing; ++j) {
        agree = agree && FieldsOf(lines[j].text, d) == n;
      }
      if (!agree) continue;
      for (char other : {',', ';', '\t', '|'}) {  // a header written with another delimiter is no line to leave out
        if (FieldsOf(lines[k - 1].text, other) == n) return {};
      }
      LeadingLines left;
      for (size_t j = 0; j < k; ++j) left.lines.emplace_back(lines[j].text);
      left.bytes = lines[k - 1].next;
      return left;
    }
  }
  return {};
}

char DetectCsvDecimal(std::string_view text, char delimiter) {
  if (delimiter == ',') return '.';
  const auto digits = [](std::string_view v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  // "1,5" and "-0,25" (digits, one mark, digits) against "1.5".
  const auto written_with = [&](std::string_view v, char mark) {
    if (!v.empty() && (v[0] == '-' || v[0] == '+')) v.remove_prefix(1);
    const size_t at = v.find(mark);
    return at != std::string_view::npos && digits(v.substr(0, at)) && digits(v.substr(at + 1));
  };
  size_t commas = 0, points = 0;
  const char ends[] = {delimiter, delimiter == kWhitespaceDelimiter ? '\t' : '\n', '\n', '\0'};  // of a field
  const size_t header_end = text.find('\n');
  for (size_t at = header_end == std::string_view::npos ? text.size() : header_end + 1; at < text.size();) {
    const size_t end = text.find_first_of(ends, at);
    if (end == std::string_view::npos) break;  // the last line may be cut: left out
    std::string_view v = text.substr(at, end - at);
    while (!v.empty() && (v.back() == '\r' || v.back() == ' ' || v.back() == '"')) v.remove_suffix(1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '"')) v.remove_prefix(1);
    commas += written_with(v, ',');
    points += written_with(v, '.');
    at = end + 1;
  }
  return commas > 0 && points == 0 ? ',' : '.';
}

std::string CsvDelimiterName(char delimiter) {
  if (delimiter == kWhitespaceDelimiter) return "whitespace";
  return delimiter == '\t' ? "tab" : std::string(1, delimiter);
}

std::string QuotedCsvDelimiter(char delimiter) {
  if (delimiter == '\t' || delimiter == kWhitespaceDelimiter) return CsvDelimiterName(delimiter);
  return "'" + std::string(1, delimiter) + "'";
}

bool CsvTable::HeldOut(double fraction, uint64_t line) {
  const uint64_t h = XXH64(&line, sizeof(line), 0);  // by line number: deterministic
  return static_cast<double>(h % 1000000) < fraction * 1e6;
}

std::string PeekText(const std::string& path, size_t most) {
  ReadOnlyFile file;
  if (!file.Open(path).ok()) return "";
  std::string text(static_cast<size_t>(std::min<uint64_t>(file.size_bytes(), most)), '\0');
  if (!file.ReadAt(0, text.size(), text.data()).ok()) return "";
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  if (text.compare(0, 2, "\x1f\x8b") == 0 || text.compare(0, 4, "\x28\xb5\x2f\xfd") == 0) return "";
  return text;
}

bool StartsArff(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t start = text.find_first_not_of(" \t\r\n", at);
    if (start == std::string_view::npos) return false;
    if (text[start] != '%') return AsciiLower(std::string(text.substr(start, 9))) == "@relation";
    at = text.find('\n', start);
    if (at == std::string_view::npos) return false;
  }
  return false;
}

namespace {

// An ARFF file's header: its @attribute names, and where its @data rows start.
struct ArffHeader {
  std::vector<std::string> names;
  uint64_t offset = 0;  // the byte after the @data line
  uint64_t line = 0;    // the line after it
};

// The header of the ARFF file `file`, read from byte `start` (up to 16 MiB);
// InvalidArgument naming `path` where it has no @attribute or @data line, a
// relational attribute, or sparse rows ("{0 X, 3 Y}").
StatusOr<ArffHeader> ReadArffHeader(const ReadOnlyFile& file, uint64_t start, const std::string& path) {
  std::string text(static_cast<size_t>(std::min<uint64_t>(16 << 20, file.size_bytes() - start)), '\0');
  GRANARY_RETURN_IF_ERROR(file.ReadAt(start, text.size(), text.data()));
  ArffHeader header;
  uint64_t line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string l = text.substr(at, end - at);
    if (!l.empty() && l.back() == '\r') l.pop_back();
    l = TrimCsvField(l);
    at = end + 1;
    ++line;
    if (!header.names.empty() && header.offset > 0) {  // the first row after @data
      if (l.empty() || l[0] == '%') continue;
      if (l[0] == '{') {
        return Status::InvalidArgument(path + ":" + std::to_string(line) + ": sparse ARFF rows ({index value, ...}) "
                                       "are not read: write it dense (Weka's SparseToNonSparse filter) first");
      }
      return header;
    }
    const std::string keyword = AsciiLower(l.substr(0, l.find_first_of(" \t")));
    if (keyword == "@data") {
      header.offset = start + at;
      header.line = line + 1;
      if (header.names.empty()) return Status::InvalidArgument(path + ": an ARFF file without @attribute lines");
    } else if (keyword == "@attribute") {
      std::string rest = TrimCsvField(l.substr(keyword.size()));
      const char quote = rest.empty() ? 0 : rest[0];
      const size_t name_end = quote == '\'' || quote == '"' ? rest.find(quote, 1) : rest.find_first_of(" \t{");
      if (name_end == std::string::npos || name_end == 0) {
        return Status::InvalidArgument(path + ":" + std::to_string(line) + ": an @attribute without a name and type");
      }
      const bool quoted = quote == '\'' || quote == '"';
      header.names.push_back(rest.substr(quoted ? 1 : 0, name_end - (quoted ? 1 : 0)));
      if (AsciiLower(TrimCsvField(rest.substr(name_end + (quoted ? 1 : 0)))).rfind("relational", 0) == 0) {
        return Status::InvalidArgument(path + ":" + std::to_string(line) + ": a relational attribute ('" +
                                       header.names.back() + "'): prep reads ARFF files of plain attributes");
      }
    }
  }
  if (header.offset == 0) return Status::InvalidArgument(path + ": an ARFF file without an @data line");
  return header;  // @data with no row after it: the scan says there are none
}

// Whether the two lines after the header line `text` starts with (one if
// there is no other) have one field more than the header's `fields` (by
// `delimiter`): each row's name first, as R's write.table writes a table
// (and read.table reads it).
bool RowsNamedBeyondHeader(std::string_view text, char delimiter, size_t fields) {
  const std::vector<TextLine> lines = FirstLines(text, 3);
  if (lines.size() < 2 || FieldsOf(lines[1].text, delimiter) != fields + 1) return false;
  return lines.size() < 3 || lines[2].text.empty() || FieldsOf(lines[2].text, delimiter) == fields + 1;
}

// Leaves out the comment mark numpy.savetxt writes before a header ("# a,b,label";
// "# a b label", its own field where fields are separated by whitespace);
// whether there was one. A column named "#" (a number) stays where commas
// separate the fields.
bool DropCommentMark(char delimiter, std::vector<std::string>* header) {
  std::string& first = header->front();
  if (first.empty() || first[0] != '#') return false;
  if (delimiter != kWhitespaceDelimiter && (first.size() < 2 || first[1] != ' ')) return false;
  const std::string rest = TrimCsvField(first.substr(1));
  if (!rest.empty()) {
    first = rest;
  } else if (header->size() > 1) {
    header->erase(header->begin());
  } else {
    return false;
  }
  return true;
}

// InvalidArgument naming what the table at `path` is where its first bytes
// (`text`, after a byte order mark) show another format: UTF-16 text, an
// archive, a table or array file of another kind; OK otherwise.
Status RefuseOtherFormat(const std::string& path, std::string_view text, const std::string& compression) {
  if (IsGitLfsPointer(text)) return Status::InvalidArgument(path + ": is " + kGitLfsAdvice);
  if (text.substr(0, 2) == "\xFF\xFE" || text.substr(0, 2) == "\xFE\xFF" ||
      (text.size() >= 2 && (text[0] == '\0' || text[1] == '\0'))) {
    return Status::InvalidArgument(path + ": is UTF-16 (a byte order mark or NUL bytes): prep reads UTF-8 CSV; "
                                   "save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)");
  }
  if (text.size() > 262 && text.substr(257, 5) == "ustar") {
    return Status::InvalidArgument(path + ": is a tar archive" + (compression.empty() ? "" : " (" +
                                   compression + "-compressed)") + ": prep reads a folder or a table, not an "
                                   "archive; extract it first (tar xf " + path + ") and build from what it holds");
  }
  if (text.substr(0, 4) == "PAR1") {
    return Status::InvalidArgument(path + ": is a Parquet file: prep reads CSV text (pandas writes it: "
                                   "pd.read_parquet(...).to_csv(..., index=False))");
  }
  if (text.substr(0, 8) == "\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1") {  // OLE2: Excel 97-2003 and its kin
    return Status::InvalidArgument(path + ": is an Excel 97-2003 workbook (or another OLE2 file): prep reads CSV "
                                   "text; save the sheet as CSV (pandas: pd.read_excel('" + path +
                                   "').to_csv('table.csv', index=False))");
  }
  if (const size_t at = text.find_first_not_of(" \t\r\n"); at != std::string_view::npos && (text[at] == '{' ||
                                                                                             text[at] == '[')) {
    const bool lines = text[at] == '{';
    return Status::InvalidArgument(path + ": is " + (lines ? "JSON Lines (an object a line)" : "JSON") +
                                   ", not CSV: prep reads CSV text; convert it (pandas: pd.read_json('" + path + "'" +
                                   (lines ? ", lines=True" : "") + ").to_csv('table.csv', index=False)), or write "
                                   "its records from Python with granary.write");
  }
  if (const std::string facts = NumpyArrayFacts(text); !facts.empty()) {
    return Status::InvalidArgument(path + ": is " + facts + ": prep reads CSV text; write it as CSV (pandas: "
                                   "pd.DataFrame(np.load('" + path + "')).to_csv('table.csv', index=False))");
  }
  if (text.substr(0, 7) == "MATLAB ") {  // a MAT-file's text header (version 7.3's is HDF5 after it)
    return Status::InvalidArgument(path + ": is a MATLAB file (.mat): prep reads CSV text; read it with "
                                   "scipy.io.loadmat('" + path + "') and save the table as CSV (pandas: "
                                   "pd.DataFrame(...).to_csv('table.csv', index=False))");
  }
  if (text.substr(0, 8) == "\x89HDF\r\n\x1a\n") {
    return Status::InvalidArgument(path + ": is an HDF5 file: prep reads CSV text; read it with h5py or pandas "
                                   "(pd.read_hdf('" + path + "').to_csv('table.csv', index=False))");
  }
  if (text.substr(0, 6) == "ARROW1") {
    return Status::InvalidArgument(path + ": is an Arrow (Feather) file: prep reads CSV text (pandas writes it: "
                                   "pd.read_feather('" + path + "').to_csv('table.csv', index=False))");
  }
  if (text.size() >= 2 && text[0] == '\x80' && text[1] >= 2 && text[1] <= 5) {  // pickle protocols 2-5
    return Status::InvalidArgument(path + ": is a Python pickle: prep reads CSV text; load it in Python and save "
                                   "it as CSV (a pandas DataFrame: pd.read_pickle('" + path + "').to_csv("
                                   "'table.csv', index=False)), or write its samples with granary.write");
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::shared_ptr<const CsvTable>> CsvTable::Scan(
    const std::string& path, const CsvScanOptions& options,
    const std::function<StatusOr<size_t>(const std::vector<std::string>& header)>& on_header,
    const std::function<Status(const CsvParser::Row&, int part)>& on_row) {
  auto table = std::make_shared<CsvTable>();
  table->path_ = path;
  table->val_fraction_ = options.val_fraction;
  const bool header = options.header;
  if (Status opened = table->file_.Open(path); !opened.ok()) {
    if (opened.code() != Status::Code::kInvalidArgument) return opened;
    return Status::InvalidArgument(opened.message() + ": prep reads a CSV table twice, streaming it (once for its "
                                   "rows and labels, then as it writes them); save a pipe's table to a file first");
  }
  GRANARY_RETURN_IF_ERROR(table->Decompress(options.temp_dir, options.show_progress));
  // The header line, or as much of it as the first 64 KiB hold.
  std::string first(static_cast<size_t>(std::min<uint64_t>(64 << 10, table->bytes())), '\0');
  GRANARY_RETURN_IF_ERROR(table->file_.ReadAt(0, first.size(), first.data()));
  // A UTF-8 byte order mark (spreadsheets write one) is not part of the first header.
  const bool bom = first.compare(0, 3, "\xEF\xBB\xBF") == 0;
  const std::string_view text = std::string_view(first).substr(bom ? 3 : 0);
  GRANARY_RETURN_IF_ERROR(RefuseOtherFormat(path, text, table->compression_));
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidArgument(path + ": is not a text table (a NUL byte at byte " +
                                   std::to_string(nul + (bom ? 3 : 0)) + "): prep reads CSV text");
  }
  table->arff_ = StartsArff(text);  // its rows are CSV with ',' and '.'
  const LeadingLines lead = table->arff_ ? LeadingLines() : LinesBeforeTheTable(text, options.delimiter);
  table->lines_left_out_ = lead.lines;
  const std::string_view from_header = text.substr(lead.bytes);
  table->delimiter_ = table->arff_ ? ',' : options.delimiter != 0 ? options.delimiter : DetectCsvDelimiter(from_header);
  table->decimal_ = table->arff_               ? '.'
                    : options.decimal != 0 ? options.decimal
                                           : DetectCsvDecimal(from_header, table->delimiter_);
  bool header_seen = false;
  size_t column = CsvParser::kAllColumns;
  uint64_t start = (bom ? 3 : 0) + lead.bytes, line = 1 + lead.lines.size();  // of the header row
  if (table->arff_) {  // the header is its @attribute lines
    GRANARY_ASSIGN_OR_RETURN(const ArffHeader arff, ReadArffHeader(table->file_, bom ? 3 : 0, path));
    table->header_ = arff.names;
    GRANARY_ASSIGN_OR_RETURN(column, on_header(table->header_));
    header_seen = true;
    start = arff.offset;
    line = arff.line;
  }
  const auto data_row = [&](const CsvParser::Row& row, int part) {
    // Blocks start at rows, about kBlockBytes apart.
    if (table->blocks_.empty() || row.offset - table->blocks_.back().offset >= kBlockBytes) {
      table->blocks_.push_back({row.offset, row.line, {table->part_rows_[0], table->part_rows_[1]}});
    }
    ++table->part_rows_[part];
    return on_row(row, part);
  };
  ProgressLine progress("reading " + Printable(std::filesystem::path(path).filename().string()), table->bytes(),
                        options.show_progress && table->bytes() >= kProgressBytes, ProgressUnit::kBytes);
  const auto read_row = [&](const CsvParser::Row& row, int part) -> Status {
    if (header_seen) return data_row(row, part);
    header_seen = true;
    for (size_t c = 0; c < row.columns; ++c) {
      table->header_.push_back(header ? TrimCsvField((*row.fields)[c]) : std::to_string(c + 1));
    }
    if (header) {
      table->header_commented_ = DropCommentMark(table->delimiter_, &table->header_);
      table->row_names_ = RowsNamedBeyondHeader(from_header, table->delimiter_, table->header_.size());
      if (table->row_names_) table->header_.insert(table->header_.begin(), "");  // IsIndexColumn
    }
    GRANARY_ASSIGN_OR_RETURN(column, on_header(table->header_));
    if (header) return Status::OK();
    // No header: this row is the first of the data, keeping the one column later rows keep.
    std::vector<std::string> kept;
    if (column == CsvParser::kAllColumns) kept = *row.fields;
    if (column < row.fields->size()) kept.push_back((*row.fields)[column]);
    CsvParser::Row first = row;
    first.fields = &kept;
    return data_row(first, part);
  };
  GRANARY_RETURN_IF_ERROR(table->ScanRows(start, line, &column, read_row, &progress));
  if (!header_seen) return Status::InvalidArgument(path + (header ? ": no header row" : ": no rows"));
  if (table->blocks_.empty()) return Status::InvalidArgument(path + ": a header and no data rows");
  return std::shared_ptr<const CsvTable>(std::move(table));
}

Status CsvTable::Decompress(const std::string& temp_dir, bool show_progress) {
  char start[6] = {0, 0, 0, 0, 0, 0};
  const size_t head = static_cast<size_t>(std::min<uint64_t>(sizeof(start), bytes()));
  GRANARY_RETURN_IF_ERROR(file_.ReadAt(0, head, start));
  compression_ = CompressionOf(std::string_view(start, head));
  if (compression_.empty()) return Status::OK();
  if (compression_ == "zip") {  // Kaggle's downloads: a folder of images or a table inside; or a workbook
    GRANARY_RETURN_IF_ERROR(RefuseSpreadsheet());
    return Status::InvalidArgument(path_ + ": is a zip archive: prep reads a folder or a table, not an archive; "
                                   "extract it first (unzip " + path_ + " -d DIR) and build from what it holds");
  }
  if (compression_ != "gzip" && compression_ != "zstd") {
    return Status::InvalidArgument(path_ + ": is " + compression_ + "-compressed: prep reads CSV text as it is, " +
                                   "gzip or zstd; decompress it first (" + DecompressCommand(compression_, path_) +
                                   ")");
  }
  ProgressLine progress("decompressing " + Printable(std::filesystem::path(path_).filename().string()), bytes(),
                        show_progress && bytes() >= kProgressBytes, ProgressUnit::kBytes);
  GRANARY_ASSIGN_OR_RETURN(const int fd, DecompressToUnnamedFile(path_, compression_, temp_dir, &progress));
  return file_.Adopt(fd, path_);
}

Status CsvTable::RefuseSpreadsheet() const {
  // An .xlsx or .ods is a zip whose entries say so (xl/workbook.xml; ODF's "mimetype" entry comes first),
  // as its name does.
  std::string start(static_cast<size_t>(std::min<uint64_t>(64 << 10, bytes())), '\0');
  GRANARY_RETURN_IF_ERROR(file_.ReadAt(0, start.size(), start.data()));
  const auto ends = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return path_.size() >= n && path_.compare(path_.size() - n, n, suffix) == 0;
  };
  const bool ods = start.find("opendocument.spreadsheet") != std::string::npos || ends(".ods");
  const bool xlsx = start.find("xl/workbook") != std::string::npos || start.find("xl/_rels/") != std::string::npos;
  if (!ods && !xlsx && !ends(".xlsx") && !ends(".xlsm")) return Status::OK();
  return Status::InvalidArgument(path_ + ": is " + (ods ? "an OpenDocument spreadsheet" : "an Excel workbook") +
                                 ": prep reads CSV text; save the sheet as CSV (pandas: pd.read_excel('" + path_ +
                                 "'" + (ods ? ", engine='odf'" : "") + ").to_csv('table.csv', index=False); or the "
                                 "spreadsheet's Save As, CSV)");
}

int CsvTable::PartOf(uint64_t line) const { return val_fraction_ > 0 && HeldOut(val_fraction_, line) ? 1 : 0; }

Status CsvTable::ScanRows(uint64_t offset, uint64_t line, const size_t* column,
                          const std::function<Status(const CsvParser::Row&, int part)>& on_row,
                          ProgressLine* progress) const {
  constexpr size_t kPiece = 1 << 20;
  std::string piece(static_cast<size_t>(std::min<uint64_t>(kPiece, bytes())), '\0');
  CsvParser parser;
  parser.Reset(line, offset);
  parser.SetDelimiter(delimiter_);
  parser.SetArff(arff_);
  parser.Keep(*column);
  const auto row = [&](const CsvParser::Row& r) {
    Status status = on_row(r, PartOf(r.line));
    parser.Keep(*column);  // the header's callback chooses the column
    return status;
  };
  for (uint64_t at = offset; at < bytes();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, bytes() - at));
    GRANARY_RETURN_IF_ERROR(file_.ReadAt(at, n, piece.data()));
    GRANARY_RETURN_IF_ERROR(parser.Feed(std::string_view(piece.data(), n), row));
    at += n;
    if (progress != nullptr) progress->Add(n, 0);
    if (parser.open_row_bytes() > kMaxRowBytes) {
      return Status::InvalidArgument(path_ + ": a row longer than " + std::to_string(kMaxRowBytes >> 20) +
                                     " MiB (an unterminated quoted field?)");
    }
  }
  return parser.End(path_, row);
}

Status CsvTable::ForEachRow(size_t column,
                            const std::function<Status(const CsvParser::Row&, int part)>& on_row) const {
  return ScanRows(blocks_[0].offset, blocks_[0].line, &column, on_row);
}

uint64_t CsvTable::BlockEnd(size_t block) const {
  return block + 1 < blocks_.size() ? blocks_[block + 1].offset : bytes();
}

StatusOr<std::shared_ptr<const CsvTable::Loaded>> CsvTable::Load(size_t block) const {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = std::find_if(cache_.begin(), cache_.end(), [&](const auto& s) { return s->block == block; });
    if (found != cache_.end()) {
      slot = *found;
      cache_.erase(found);
    } else {
      slot = std::make_shared<Slot>();
      slot->block = block;
      if (cache_.size() == kCachedBlocks) cache_.erase(cache_.begin());
    }
    cache_.push_back(slot);
  }
  std::call_once(slot->once, [&] { slot->status = Read(block, &slot->loaded); });
  if (!slot->status.ok()) return slot->status;
  return slot->loaded;
}

Status CsvTable::Read(size_t block, std::shared_ptr<const Loaded>* out) const {
  const Block& b = blocks_[block];
  auto loaded = std::make_shared<Loaded>();
  loaded->text.resize(static_cast<size_t>(BlockEnd(block) - b.offset));
  GRANARY_RETURN_IF_ERROR(file_.CheckUnchanged().WithContext("prep read it twice"));
  GRANARY_RETURN_IF_ERROR(file_.ReadAt(b.offset, loaded->text.size(), loaded->text.data()));
  CsvParser parser;
  parser.Reset(b.line, 0);
  parser.SetDelimiter(delimiter_);
  parser.SetArff(arff_);
  parser.Keep(CsvParser::kNoColumn);
  const auto row = [&](const CsvParser::Row& r) {
    loaded->of_part[PartOf(r.line)].push_back(static_cast<uint32_t>(loaded->begin.size()));
    loaded->begin.push_back(static_cast<uint32_t>(r.offset));
    loaded->line.push_back(r.line);
    return Status::OK();
  };
  GRANARY_RETURN_IF_ERROR(parser.Feed(loaded->text, row));
  GRANARY_RETURN_IF_ERROR(parser.End(path_, row));
  loaded->begin.push_back(static_cast<uint32_t>(loaded->text.size()));
  for (int part : {0, 1}) {
    const uint64_t expected = (block + 1 < blocks_.size() ? blocks_[block + 1].before[part] : part_rows_[part]) -
                              b.before[part];
    if (loaded->of_part[part].size() != expected) {
      return Status::Corruption(path_ + ": changed while prep read it (the rows from byte " +
                                std::to_string(b.offset) + " differ from its first reading)");
    }
  }
  *out = std::move(loaded);
  return Status::OK();
}

Status CsvTable::ReadRow(int part, uint64_t nth, std::vector<std::string>* fields, uint64_t* line) const {
  // The block holding it: the last whose rows of `part` before it are at most nth.
  const auto after = std::upper_bound(blocks_.begin(), blocks_.end(), nth,
                                      [&](uint64_t n, const Block& b) { return n < b.before[part]; });
  const size_t block = static_cast<size_t>(after - blocks_.begin()) - 1;
  GRANARY_ASSIGN_OR_RETURN(const std::shared_ptr<const Loaded> loaded, Load(block));
  const uint32_t r = loaded->of_part[part][nth - blocks_[block].before[part]];
  *line = loaded->line[r];
  if (fields == nullptr) return Status::OK();
  thread_local CsvParser parser;
  parser.Reset(*line, 0);
  parser.SetDelimiter(delimiter_);
  parser.SetArff(arff_);
  const auto row = [&](const CsvParser::Row& parsed) {
    *fields = *parsed.fields;
    return Status::OK();
  };
  const std::string_view text(loaded->text.data() + loaded->begin[r], loaded->begin[r + 1] - loaded->begin[r]);
  GRANARY_RETURN_IF_ERROR(parser.Feed(text, row));
  return parser.End(path_, row);
}

void NoteLinesLeftOut(const CsvTable& table, std::vector<std::string>* notes) {
  const std::vector<std::string>& lines = table.lines_left_out();
  if (!lines.empty()) {
    std::string shown;
    for (const std::string& line : lines) {
      if (!TrimCsvField(line).empty()) shown += (shown.empty() ? "'" : ", '") + Printable(line.substr(0, 80)) + "'";
    }
    const std::string which = lines.size() == 1 ? "line 1" : "lines 1-" + std::to_string(lines.size());
    notes->push_back(table.path() + ": " + which + " (" + shown + ") " + (lines.size() == 1 ? "is" : "are") +
                     " no row of the table below (its " + std::to_string(table.header().size()) +
                     " columns are separated by " + QuotedCsvDelimiter(table.delimiter()) +
                     "): left out, as pandas' skiprows=" + std::to_string(lines.size()) + " would");
  }
  if (table.header_commented()) {
    notes->push_back(table.path() + ": the '#' before the header (numpy.savetxt's comment mark) left out");
  }
  if (table.row_names()) {
    notes->push_back(table.path() + ": its rows have a field more than its header: the first of each is the row's "
                     "name (as R's write.table writes them), left out");
  }
}

}  // namespace granary
