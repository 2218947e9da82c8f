#include "preprocess/csv_layout.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/json_text.h"
#include "preprocess/csv_table.h"
#include "preprocess/folder_layout.h"

namespace granary {

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

bool RowsNamedBeyondHeader(std::string_view text, char delimiter, size_t fields) {
  const std::vector<TextLine> lines = FirstLines(text, 3);
  if (lines.size() < 2 || FieldsOf(lines[1].text, delimiter) != fields + 1) return false;
  return lines.size() < 3 || lines[2].text.empty() || FieldsOf(lines[2].text, delimiter) == fields + 1;
}

bool DropNumpyCommentMark(char delimiter, std::vector<std::string>* header) {
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

std::vector<std::string> PeekCsvHeader(const std::string& path, char delimiter) {
  std::string text = PeekText(path, 1 << 20);
  text.erase(0, LinesBeforeTheTable(text, delimiter).bytes);
  CsvParser parser;
  parser.SetDelimiter(delimiter != 0 ? delimiter : DetectCsvDelimiter(text));
  std::vector<std::string> header;
  const auto first_row = [&](const CsvParser::Row& row) {
    for (const std::string& field : *row.fields) header.push_back(TrimCsvField(field));
    return Status::FailedPrecondition("one row is all a header is");
  };
  parser.Feed(text, first_row).PermitUncheckedError();
  return header;
}

std::string ColumnOnlyIn(const std::vector<std::string>& header, const std::vector<std::string>& other) {
  if (other.size() + 1 != header.size()) return "";
  for (size_t c = 0; c < header.size(); ++c) {
    std::vector<std::string> without = header;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(c));
    if (without == other) return header[c];
  }
  return "";
}

std::string FolderOfImagesNamed(const std::string& table, const std::vector<std::string>& names) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(table).parent_path();
  std::vector<fs::path> folders = {dir};
  for (const std::string& sub : SortedSubdirs(dir.empty() ? "." : dir)) folders.push_back(dir / sub);
  const size_t looked = std::min<size_t>(names.size(), 20);
  for (const fs::path& folder : folders) {
    size_t found = 0;
    for (size_t i = 0; i < looked && 2 * (i - found) < looked; ++i) {  // until too few can be found here
      std::error_code ec;
      for (const char* extension : {"", ".jpg", ".png", ".jpeg"}) {
        const fs::path image = folder / (names[i] + extension);
        if (HasImageExtension(image) && fs::is_regular_file(image, ec)) {
          ++found;
          break;
        }
      }
    }
    if (looked > 0 && 2 * found > looked) return folder.lexically_normal().string() + "/";
  }
  return "";
}

std::string ImagesNamedHint(const std::string& path, const std::vector<std::string>& header, char delimiter) {
  const std::string text = PeekText(path, 1 << 16);
  const std::vector<TextLine> lines = FirstLines(text, 21);
  if (delimiter == 0) delimiter = DetectCsvDelimiter(text);
  if (lines.size() < 2 || delimiter == kWhitespaceDelimiter) return "";
  std::vector<std::vector<std::string>> columns(header.size());
  for (size_t l = 1; l < lines.size(); ++l) {
    std::vector<std::string> fields = {""};
    for (char c : lines[l].text) {
      if (c == delimiter) {
        fields.emplace_back();
      } else {
        fields.back().push_back(c);
      }
    }
    if (fields.size() != header.size()) continue;
    for (size_t c = 0; c < fields.size(); ++c) columns[c].push_back(TrimCsvField(fields[c]));
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    const std::string folder = FolderOfImagesNamed(path, columns[c]);
    if (folder.empty()) continue;
    return "; its column '" + header[c] + "' names the images in " + folder + ": a table of their labels? prep build " +
           folder.substr(0, folder.size() - 1) + " DB --labels " + path + " --label COLUMN reads them so";
  }
  return "";
}

}  // namespace granary
