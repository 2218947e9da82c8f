// How a table's text is laid out, found from its first bytes: the
// delimiter and decimal mark, lines above the header that are none of its
// rows, numpy's comment mark before a header, R's row names, an ARFF file's
// header. Internal to preprocess (csv_table.cc, csv_source.cc, encode_table.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/file.h"
#include "base/status.h"

namespace granary {

class CsvTable;

// The delimiter of a table whose header line starts `text` (up to its first
// line end outside quotes): ',' if it holds one, else the one of ';', '\t'
// and '|' it holds most of (spreadsheets in locales with a decimal comma
// write ';', TSV files a tab), else kWhitespaceDelimiter where it and the
// line after it are the same number of fields (two or more) between spaces
// (a header's leading '#', as numpy.savetxt writes one, not counted; the
// line after it one more, as R's write.table writes each row's name), else ','.
char DetectCsvDelimiter(std::string_view text);

// The lines `text` (a table's first bytes) starts with that are no rows of
// the table below them: each without the delimiter that splits the lines
// after them into the same number of fields, two or more, and not the
// header of those lines written with another (UCI's adult.test starts
// "|1x3 Cross validator"; a title above a spreadsheet's table). At most 10,
// and none where no such lines follow. `delimiter` 0: any of ',', ';', '\t'
// and '|'; else that one.
struct LeadingLines {
  std::vector<std::string> lines;  // as they are, without their line ends
  size_t bytes = 0;                // up to the first line of the table
};
LeadingLines LinesBeforeTheTable(std::string_view text, char delimiter);

// The first `most` bytes of the plain text file at `path`, after a byte
// order mark; "" where it cannot be read so (a compressed file): a peek.
std::string PeekText(const std::string& path, size_t most);

// Whether `text` (a file's first bytes) starts, after '%' comments and
// blank lines, with ARFF's @relation (Weka's format; OpenML's datasets).
bool StartsArff(std::string_view text);

// The decimal mark of a table separated by `delimiter` whose first lines are
// `text` (its header first): ',' where the delimiter is not ',' and its
// numbers are written with a decimal comma ("1,5") and none with a point, as
// spreadsheets in many locales save ';'-separated CSV; '.' otherwise.
char DetectCsvDecimal(std::string_view text, char delimiter);

// How a delimiter is named in messages and options: ",", ";", "tab", "|", "whitespace".
std::string CsvDelimiterName(char delimiter);
// How a message (and the shell) writes it: ',', ';', '|', tab or whitespace.
std::string QuotedCsvDelimiter(char delimiter);

// An ARFF file's header: its @attribute names, and where its @data rows start.
struct ArffHeader {
  std::vector<std::string> names;
  uint64_t offset = 0;  // the byte after the @data line
  uint64_t line = 0;    // the line after it
};

// The header of the ARFF file `file`, read from byte `start` (up to 16 MiB);
// InvalidArgument naming `path` where it has no @attribute or @data line, a
// relational attribute, or sparse rows ("{0 X, 3 Y}").
StatusOr<ArffHeader> ReadArffHeader(const ReadOnlyFile& file, uint64_t start, const std::string& path);

// Whether the two lines after the header line `text` starts with (one if
// there is no other) have one field more than the header's `fields` (by
// `delimiter`): each row's name first, as R's write.table writes a table
// (and read.table reads it).
bool RowsNamedBeyondHeader(std::string_view text, char delimiter, size_t fields);

// Leaves out the comment mark numpy.savetxt writes before a header ("# a,b,label";
// "# a b label", its own field where fields are separated by whitespace);
// whether there was one. A column named "#" (a number) stays where commas
// separate the fields.
bool DropNumpyCommentMark(char delimiter, std::vector<std::string>* header);

// Notes (each starting with the table's path) what was left out of
// `table`: the lines it starts with that are no rows of it, numpy.savetxt's
// comment mark before its header, each row's name (R's write.table).
void NoteLinesLeftOut(const CsvTable& table, std::vector<std::string>* notes);

// The header of the plain table at `path` (its first row, trimmed, as Scan
// finds it), or none where it cannot be read so (a compressed file, no row
// in its first MiB): a peek, which never fails a build.
std::vector<std::string> PeekCsvHeader(const std::string& path, char delimiter);

// The column of `header` that `other` (a test file's header) lacks, where
// it lacks exactly one and has the rest in order: the label, as Kaggle
// ships train.csv beside test.csv; "" otherwise.
std::string ColumnOnlyIn(const std::vector<std::string>& header, const std::vector<std::string>& other);

// The folder beside the table at `table` (its own, or one in it) where the
// images `names` name lie (most of the first ones: by the name, or by the
// name and .jpg, .png or .jpeg, as Kaggle's ids name images), with a '/'
// after it; "" where none holds them.
std::string FolderOfImagesNamed(const std::string& table, const std::vector<std::string>& names);

// "; its column 'id' names the images in train/: a table of their labels?
// prep build train DB --labels TABLE --label COLUMN reads them so" where a
// column of the first rows of the table at `path` (of header `header`)
// names images beside it (FolderOfImagesNamed); "" otherwise.
std::string ImagesNamedHint(const std::string& path, const std::vector<std::string>& header, char delimiter);

}  // namespace granary
