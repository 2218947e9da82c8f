// CsvParser and CsvTable: a table read in pieces and blocks gives the rows,
// fields and lines of one parse of the whole text.
#include "preprocess/csv_table.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <random>

#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

struct ParsedRow {
  uint64_t line = 0;
  std::vector<std::string> fields;
  bool operator==(const ParsedRow& o) const { return line == o.line && fields == o.fields; }
};

// `text` parsed by one parser fed pieces of `piece` bytes (0: all at once).
std::vector<ParsedRow> Parse(const std::string& text, size_t piece) {
  std::vector<ParsedRow> rows;
  CsvParser parser;
  parser.Reset();
  const auto on_row = [&](const CsvParser::Row& r) {
    rows.push_back({r.line, *r.fields});
    EXPECT_EQ(r.columns, r.fields->size());
    return Status::OK();
  };
  if (piece == 0) piece = text.size() + 1;
  for (size_t at = 0; at < text.size(); at += piece) {
    EXPECT_TRUE(parser.Feed(std::string_view(text).substr(at, piece), on_row).ok());
  }
  EXPECT_TRUE(parser.End("t.csv", on_row).ok());
  return rows;
}

// Rows of numbers and awkward fields: quoted commas, quotes and line ends
// inside quotes, CRLF and lone CR line ends, blank lines, spaces.
std::string MessyCsv(size_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text = "x,\"y, quoted\",label\r\n";
  const char* ends[] = {"\n", "\r\n", "\r", "\n\n", "\r\n\r\n"};
  for (size_t i = 0; i < rows; ++i) {
    switch (rng() % 8) {
      case 0: text += "\"multi\nline \"\"quoted\"\"\",2,cat"; break;
      case 1: text += "  \"1,5\" , 2 ,\"dog\""; break;
      case 2: text += "1,2"; break;  // too few fields
      case 3: text += "\"a\r\nb\",\"\",bird"; break;
      default: text += std::to_string(rng() % 1000) + "." + std::to_string(rng() % 10) + ",-3e2," +
                       (rng() % 2 ? "cat" : "dog");
    }
    text += ends[rng() % 5];
  }
  return text;
}

TEST(CsvParser, PiecesOfAnySizeParseAsTheWhole) {
  const std::string text = MessyCsv(400, 1);
  const std::vector<ParsedRow> whole = Parse(text, 0);
  ASSERT_EQ(whole.size(), 401u);
  EXPECT_EQ(whole[0].fields, (std::vector<std::string>{"x", "y, quoted", "label"}));
  for (size_t piece : {1, 2, 3, 5, 7, 64, 1000}) EXPECT_EQ(Parse(text, piece), whole) << "pieces of " << piece;
  // The last row needs no line end; a quoted field left open is refused naming where its row starts.
  EXPECT_EQ(Parse("a,b\n1,\"2\"", 1).back().fields, (std::vector<std::string>{"1", "2"}));
  CsvParser parser;
  parser.Reset();
  const auto ignore = [](const CsvParser::Row&) { return Status::OK(); };
  ASSERT_TRUE(parser.Feed("a,b\n\n1,\"2\n3", ignore).ok());
  const Status open = parser.End("t.csv", ignore);
  EXPECT_EQ(open.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(open.message().find("t.csv:3: unterminated quoted field"), std::string::npos) << open.ToString();
}

// A table of many blocks: each part's rows read back by position equal the
// whole parse's, with their lines; the scan saw every row once, in order,
// keeping the column asked for.
TEST(CsvTable, RowsReadBackFromBlocksAreTheWholeParsesRows) {
  TempDir dir;
  const std::string text = MessyCsv(60000, 2);  // about 1 MB: blocks of 256 KiB
  ASSERT_GT(text.size(), 3u << 18);
  testing::WriteFile(dir.Sub("t.csv"), "\xEF\xBB\xBF" + text);
  const std::vector<ParsedRow> whole = Parse(text, 0);
  for (double val_fraction : {0.0, 0.3}) {
    std::vector<ParsedRow> scanned[2];
    auto table = CsvTable::Scan(
        dir.Sub("t.csv"), {val_fraction}, [](const std::vector<std::string>&) -> StatusOr<size_t> { return 2; },
        [&](const CsvParser::Row& r, int part) {
          scanned[part].push_back({r.line, *r.fields});
          return Status::OK();
        });
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    EXPECT_EQ(table.value()->header(), (std::vector<std::string>{"x", "y, quoted", "label"}));
    std::vector<ParsedRow> expected[2];
    for (size_t i = 1; i < whole.size(); ++i) {
      expected[CsvTable::HeldOut(val_fraction, whole[i].line) && val_fraction > 0 ? 1 : 0].push_back(whole[i]);
    }
    ASSERT_EQ(table.value()->rows(0) + table.value()->rows(1), whole.size() - 1);
    for (int part : {0, 1}) {
      ASSERT_EQ(table.value()->rows(part), expected[part].size());
      ASSERT_EQ(scanned[part].size(), expected[part].size());
      for (size_t i = 0; i < expected[part].size(); ++i) {
        const ParsedRow& want = expected[part][i];
        const std::vector<std::string> label = want.fields.size() > 2 ? std::vector<std::string>{want.fields[2]}
                                                                       : std::vector<std::string>{};
        ASSERT_EQ(scanned[part][i].fields, label) << "row " << i;
        ParsedRow got;
        // Read in a scattered order too: the cache must not hand back another block's rows.
        const uint64_t nth = (i * 7919) % expected[part].size();
        ASSERT_TRUE(table.value()->ReadRow(part, nth, &got.fields, &got.line).ok());
        ASSERT_EQ(got, expected[part][nth]) << "part " << part << " row " << nth;
      }
    }
  }
}

TEST(CsvTable, AFileChangedAfterTheScanOrARowTooLongIsNamed) {
  TempDir dir;
  const std::string text = MessyCsv(30000, 3);
  testing::WriteFile(dir.Sub("t.csv"), text);
  auto table = CsvTable::Scan(
      dir.Sub("t.csv"), {}, [](const std::vector<std::string>&) -> StatusOr<size_t> { return CsvParser::kNoColumn; },
      [](const CsvParser::Row&, int) { return Status::OK(); });
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  std::filesystem::resize_file(dir.Sub("t.csv"), text.size() / 2);
  std::vector<std::string> fields;
  uint64_t line = 0;
  const Status changed = table.value()->ReadRow(0, table.value()->rows(0) - 1, &fields, &line);
  EXPECT_EQ(changed.code(), Status::Code::kCorruption) << changed.ToString();
  EXPECT_NE(changed.message().find(dir.Sub("t.csv") + ": changed since it was opened"), std::string::npos)
      << changed.ToString();
  // Rewritten in place with as many bytes, its time set back: the rows a
  // block holds are not those the scan counted.
  std::string rows = "a,b\n";
  for (int i = 0; i < 100000; ++i) rows += "1,2\n";
  testing::WriteFile(dir.Sub("r.csv"), rows);
  const auto when = std::filesystem::last_write_time(dir.Sub("r.csv"));
  auto before = CsvTable::Scan(
      dir.Sub("r.csv"), {}, [](const std::vector<std::string>&) -> StatusOr<size_t> { return 1; },
      [](const CsvParser::Row&, int) { return Status::OK(); });
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  for (size_t i = 7; i < rows.size(); i += 8) rows[i] = ',';  // every second row joins the one before
  testing::WriteFile(dir.Sub("r.csv"), rows);
  std::filesystem::last_write_time(dir.Sub("r.csv"), when);
  const Status rewritten = before.value()->ReadRow(0, 0, &fields, &line);
  EXPECT_EQ(rewritten.code(), Status::Code::kCorruption) << rewritten.ToString();
  EXPECT_NE(rewritten.message().find("changed while prep read it"), std::string::npos) << rewritten.ToString();

  // A pipe cannot be read twice: named, with the way on.
  ASSERT_EQ(::mkfifo(dir.Sub("pipe.csv").c_str(), 0600), 0);
  auto pipe = CsvTable::Scan(
      dir.Sub("pipe.csv"), {}, [](const std::vector<std::string>&) -> StatusOr<size_t> { return 1; },
      [](const CsvParser::Row&, int) { return Status::OK(); });
  ASSERT_FALSE(pipe.ok());
  EXPECT_NE(pipe.status().message().find("pipe.csv: is a FIFO, not a regular file: prep reads a CSV table twice"),
            std::string::npos)
      << pipe.status().ToString();

  // One quote left open: the rest of the file would be one row.
  testing::WriteFile(dir.Sub("long.csv"), "a,b\n1,\"" + std::string(CsvTable::kMaxRowBytes + (1 << 20), 'x'));
  auto long_row = CsvTable::Scan(
      dir.Sub("long.csv"), {}, [](const std::vector<std::string>&) -> StatusOr<size_t> { return 1; },
      [](const CsvParser::Row&, int) { return Status::OK(); });
  ASSERT_FALSE(long_row.ok());
  EXPECT_NE(long_row.status().message().find("long.csv: a row longer than 64 MiB"), std::string::npos)
      << long_row.status().ToString();
}

}  // namespace
}  // namespace granary
