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

bool CsvTable::HeldOut(double fraction, uint64_t line) {
  const uint64_t h = XXH64(&line, sizeof(line), 0);  // by line number: deterministic
  return static_cast<double>(h % 1000000) < fraction * 1e6;
}

namespace {

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
      table->header_commented_ = DropNumpyCommentMark(table->delimiter_, &table->header_);
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

}  // namespace granary
