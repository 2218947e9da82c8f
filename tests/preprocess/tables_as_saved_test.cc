// Tables as numpy and UCI save them: fields between runs of spaces
// (numpy.savetxt's default, UCI's housing.data), numpy's "# " before a
// header, a line above the table that is none of its rows (UCI's
// adult.test starts "|1x3 Cross validator"), and labels written with a '.'
// after them in one file and not in the other (adult.test's "<=50K.");
// LIBSVM files, as the LIBSVM datasets page and scikit-learn write them;
// ARFF files, as Weka writes them and OpenML serves its datasets.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "preprocess/csv_table.h"
#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// The rows of `text` split at runs of whitespace, fed `piece` bytes at a time.
std::vector<std::vector<std::string>> WhitespaceRows(const std::string& text, size_t piece) {
  std::vector<std::vector<std::string>> rows;
  CsvParser parser;
  parser.Reset();
  parser.SetDelimiter(kWhitespaceDelimiter);
  const auto on_row = [&](const CsvParser::Row& r) {
    rows.push_back(*r.fields);
    return Status::OK();
  };
  for (size_t at = 0; at < text.size(); at += piece) {
    EXPECT_TRUE(parser.Feed(std::string_view(text).substr(at, piece), on_row).ok());
  }
  EXPECT_TRUE(parser.End("t.txt", on_row).ok());
  return rows;
}

// Row `i`'s features as text ("1.5 2"), or the reason it is rejected, and its label.
std::string RowOf(const SplitSource& split, uint64_t i) {
  granary::Sample s;
  if (Status st = split.Produce(i, &s); !st.ok()) return st.message();
  std::string text;
  for (size_t at = 0; at + 4 <= s.fields[0].size(); at += 4) {
    float f = 0;
    std::memcpy(&f, s.fields[0].data() + at, 4);
    char number[32];
    std::snprintf(number, sizeof(number), "%g", f);
    text += (text.empty() ? "" : " ") + std::string(number);
  }
  int64_t label = -1;
  std::memcpy(&label, s.fields[1].data(), sizeof(label));
  return text + " -> " + std::to_string(label);
}

TEST(TablesAsSaved, FieldsBetweenRunsOfSpacesAreSplitInAnyPieces) {
  const std::string text = "  0.00632  18.00\t 2.310  \n\n   \n 1 \"a b\"  \"\" 3\r\n4 5 6";
  const std::vector<std::vector<std::string>> expected = {
      {"0.00632", "18.00", "2.310"}, {"1", "a b", "", "3"}, {"4", "5", "6"}};
  for (size_t piece : {1, 2, 3, 7, 100}) EXPECT_EQ(WhitespaceRows(text, piece), expected) << piece;
}

TEST(TablesAsSaved, WhitespaceIsTheDelimiterWhereTheHeaderAndTheRowsAgreeOnIt) {
  EXPECT_EQ(DetectCsvDelimiter("a b label\n1 2 0\n"), kWhitespaceDelimiter);
  EXPECT_EQ(DetectCsvDelimiter("# a b label\n1.0e+00 2.0e+00 0.0e+00\n"), kWhitespaceDelimiter);  // numpy's header
  EXPECT_EQ(DetectCsvDelimiter(" 0.00632  18.00   2.310\n 0.02731   0.00   7.070\n"), kWhitespaceDelimiter);
  EXPECT_EQ(DetectCsvDelimiter("sale price\n100\n"), ',');  // one column with a space in its name
  EXPECT_EQ(DetectCsvDelimiter("a b\n\"1\" 2 3\n"), kWhitespaceDelimiter);  // R's write.table: each row's name
  EXPECT_EQ(DetectCsvDelimiter("a b\n1 2 3 4\n"), ',');     // no agreement
  EXPECT_EQ(DetectCsvDelimiter("a b, c\n1 2, 3\n"), ',');   // a comma first
  EXPECT_EQ(CsvDelimiterName(kWhitespaceDelimiter), "whitespace");
}

TEST(TablesAsSaved, LinesAboveTheTableThatAreNoRowsOfItAreFound) {
  const std::string adult = "|1x3 Cross validator\n25, Private, <=50K.\n38, Private, <=50K.\n28, ?, >50K.\n";
  LeadingLines lead = LinesBeforeTheTable(adult, 0);
  EXPECT_EQ(lead.lines, (std::vector<std::string>{"|1x3 Cross validator"}));
  EXPECT_EQ(lead.bytes, std::strlen("|1x3 Cross validator\n"));
  lead = LinesBeforeTheTable("Sales 2019\r\n\r\na;b;label\r\n1;2;0\r\n3;4;1\r\n", 0);  // a title, a blank line
  EXPECT_EQ(lead.lines, (std::vector<std::string>{"Sales 2019", ""}));
  EXPECT_EQ(LinesBeforeTheTable(adult, ';').lines.size(), 0u);      // no table by ';'
  EXPECT_EQ(LinesBeforeTheTable("a;b;c\n1,2,3\n4,5,6\n", 0).lines.size(), 0u);  // a header by another delimiter
  EXPECT_EQ(LinesBeforeTheTable("label\n1\n2\n", 0).lines.size(), 0u);          // a table of one column
  EXPECT_EQ(LinesBeforeTheTable("a,b,label\n1,2,0\n3,4,1\n", 0).lines.size(), 0u);
  EXPECT_EQ(LinesBeforeTheTable("a,b\n1,2,0\n3,4,1\n", 0).lines.size(), 0u);  // a short header stays the header
  EXPECT_EQ(LinesBeforeTheTable("title\n1,2\n", 0).lines.size(), 0u);       // one row is not enough to say
}

TEST(TablesAsSaved, NumpySavetxtTablesAreReadWithTheirHeaderNames) {
  TempDir dir;
  // np.savetxt("w.txt", a, header="a b label") and np.savetxt("c.csv", a, delimiter=",", header="a,b,label").
  testing::WriteFile(dir.Sub("w.txt"), "# a b label\n1.5e+00 2.0e+00 1.0e+00\n-3.0e+00 4.0e+00 0.0e+00\n");
  testing::WriteFile(dir.Sub("c.csv"), "# a,b,label\n1.5,2,1\n-3,4,0\n");
  for (const char* name : {"w.txt", "c.csv"}) {
    auto source = OpenCsvSource(dir.Sub(name), CsvOptions());
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"a", "b"})) << name;
    EXPECT_EQ(RowOf(*source->splits[0], 0), "1.5 2 -> 1");
    EXPECT_EQ(RowOf(*source->splits[0], 1), "-3 4 -> 0");
    EXPECT_NE(std::find(source->info.notes.begin(), source->info.notes.end(),
                        dir.Sub(name) + ": the '#' before the header (numpy.savetxt's comment mark) left out"),
              source->info.notes.end());
  }
  // Whitespace found is noted and recorded, so a build given it as a flag is the same build.
  auto found = OpenCsvSource(dir.Sub("w.txt"), CsvOptions());
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->info.options.at("delimiter"), "whitespace");
  // Pokemon.csv's first column is named "#" (its number): a name, where commas separate the fields.
  testing::WriteFile(dir.Sub("p.csv"), "#,hp,label\n1,45,grass\n2,60,grass\n4,39,fire\n");
  auto numbered = OpenCsvSource(dir.Sub("p.csv"), CsvOptions());
  ASSERT_TRUE(numbered.ok()) << numbered.status().ToString();
  EXPECT_EQ(numbered->info.element_names.at("features"), (std::vector<std::string>{"#", "hp"}));
}

// R's write.table writes each row's name first, without a name in the
// header (read.table reads it so); write.csv names it "" (pandas' index).
TEST(TablesAsSaved, RowNamesAsRWritesThemAreLeftOut) {
  TempDir dir;
  testing::WriteFile(dir.Sub("r.csv"), "\"x\",\"y\",\"label\"\n\"1\",1.5,2,\"a\"\n\"2\",3,4,\"b\"\n");  // sep=","
  testing::WriteFile(dir.Sub("r.txt"), "\"x\" \"y\" \"label\"\n\"1\" 1.5 2 \"a\"\n\"2\" 3 4 \"b\"\n");  // its default
  for (const char* name : {"r.csv", "r.txt"}) {
    auto source = OpenCsvSource(dir.Sub(name), CsvOptions());
    ASSERT_TRUE(source.ok()) << name << ": " << source.status().ToString();
    EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"x", "y"})) << name;
    EXPECT_EQ(RowOf(*source->splits[0], 1), "3 4 -> 1") << name;
    const std::string note = dir.Sub(name) + ": its rows have a field more than its header: the first of each is the "
                                             "row's name (as R's write.table writes them), left out";
    EXPECT_NE(std::find(source->info.notes.begin(), source->info.notes.end(), note), source->info.notes.end());
  }
  // A header of as many fields as its rows has no row names, whatever the rows after the second hold.
  testing::WriteFile(dir.Sub("t.csv"), "x,y,label\n1,2,a\n3,4,b,extra\n");
  auto plain = OpenCsvSource(dir.Sub("t.csv"), CsvOptions());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->info.element_names.at("features"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(RowOf(*plain->splits[0], 1), "4 fields, the header has 3");
}

TEST(TablesAsSaved, UciHousingWithoutAHeaderIsReadBetweenItsSpaces) {
  TempDir dir;
  testing::WriteFile(dir.Sub("housing.data"), " 0.00632  18.00   2.310  0  24.00\n 0.02731   0.00   7.070  0  21.60\n");
  CsvOptions o;
  o.header = false;
  o.label = "5";
  o.regression = true;
  auto source = OpenCsvSource(dir.Sub("housing.data"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"1", "2", "3", "4"}));
  ASSERT_EQ(source->splits[0]->size(), 2u);
  // Given outright, and named in the hint of a header read as one column.
  o.delimiter = kWhitespaceDelimiter;
  EXPECT_TRUE(OpenCsvSource(dir.Sub("housing.data"), o).ok());
  testing::WriteFile(dir.Sub("t.csv"), "a b label\n1 2 0 x\n");
  o = CsvOptions();
  o.delimiter = ',';
  EXPECT_NE(OpenCsvSource(dir.Sub("t.csv"), o).status().message().find(
                "the header is one column holding spaces: give --delimiter whitespace"), std::string::npos);
}

// adult.data as train.csv and adult.test as test.csv: the test file's first
// line is left out and its labels are the train file's classes; a model of
// the train file scores the test file's rows. Read --like a db of the train
// file, the same.
TEST(TablesAsSaved, UciAdultsTestFileIsReadAsItsTrainFilesClasses) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train.csv"), "39, State-gov, <=50K\n50, Private, >50K\n38, Private, <=50K\n");
  testing::WriteFile(dir.Sub("test.csv"), "|1x3 Cross validator\n25, Private, <=50K.\n38, ?, >50K.\n28, Private, "
                                          "<=50K.\n");
  CsvOptions o;
  o.header = false;
  o.label = "3";
  o.missing = MissingPolicy::kNaN;
  auto source = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"<=50K", ">50K"}));
  ASSERT_EQ(source->splits.size(), 2u);
  ASSERT_EQ(source->splits[1]->size(), 3u);
  EXPECT_EQ(RowOf(*source->splits[1], 0), "25 1 0 -> 0");  // features: 1, 2=Private, 2=State-gov
  EXPECT_EQ(RowOf(*source->splits[1], 1), "38 nan nan -> 1");
  EXPECT_EQ(source->splits[1]->ItemName(0), dir.Sub("test.csv") + ":2");  // lines counted from the file's first
  const std::vector<std::string> expected_notes = {
      dir.Sub("test.csv") + ": line 1 ('|1x3 Cross validator') is no row of the table below (its 3 columns are "
                            "separated by ','): left out, as pandas' skiprows=1 would",
      dir.Sub("test.csv") + ": labels '<=50K.', '>50K.' read as '<=50K', '>50K' (the same but for a '.' after them, "
                            "as UCI's adult.test writes its labels), " + dir.Sub("train.csv") + "'s"};
  for (const std::string& note : expected_notes) {
    EXPECT_NE(std::find(source->info.notes.begin(), source->info.notes.end(), note), source->info.notes.end())
        << note;
  }
  o.like.path = "adult.db";
  o.like.named = "--like adult.db";
  o.like.feature_names = {"1", "2=Private", "2=State-gov"};
  o.like.class_names = {"<=50K", ">50K"};
  auto like = OpenCsvSource(dir.Sub("test.csv"), o);
  ASSERT_TRUE(like.ok()) << like.status().ToString();
  EXPECT_EQ(RowOf(*like->splits[0], 2), "28 1 0 -> 0");
  EXPECT_NE(std::find(like->info.notes.begin(), like->info.notes.end(),
                      "label column '3': '<=50K.', '>50K.' read as '<=50K', '>50K' (the same but for a '.' after "
                      "them, as UCI's adult.test writes its labels), --like adult.db's classes"),
            like->info.notes.end());
  // A class the train file itself writes with a '.' stays its own.
  testing::WriteFile(dir.Sub("train.csv"), "1, Private, a.\n2, Private, a\n3, Private, b\n");
  testing::WriteFile(dir.Sub("test.csv"), "1, Private, a.\n2, Private, b.\n");
  o.like = LikeDb();
  auto both = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->info.class_names, (std::vector<std::string>{"a", "a.", "b"}));
  EXPECT_EQ(RowOf(*both->splits[1], 0), "1 1 -> 1");
  EXPECT_EQ(RowOf(*both->splits[1], 1), "2 1 -> 2");
}

TEST(TablesAsSaved, LibsvmFilesAreFoundByTheirLines) {
  EXPECT_TRUE(LooksLikeSvmlight("-1 3:1 11:1 14:1\n+1 5:1 7:0.5\n"));
  EXPECT_TRUE(LooksLikeSvmlight("2 1:0.25 4:-1e-3 # a comment\n\n1 qid:3 2:1\n"));
  EXPECT_TRUE(LooksLikeSvmlight("1 1:0.5 2:x\n0 3:1\n"));  // a bad value: the line is rejected, not the format
  EXPECT_FALSE(LooksLikeSvmlight("a,b,label\n1,2,0\n"));
  EXPECT_FALSE(LooksLikeSvmlight("1.5 2 0\n3 4 1\n"));  // numbers between spaces: a table
  EXPECT_FALSE(LooksLikeSvmlight("-1 3:1 11:1"));      // no whole line yet
  TempDir dir;
  testing::WriteFile(dir.Sub("a9a"), "-1 3:1 11:1\n+1 5:1 7:0.5\n");
  RawOptions raw;
  raw.raw = dir.Sub("a9a");
  auto source = OpenSource(raw);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.kind, "svmlight");
  EXPECT_EQ(source->info.options.at("format"), "svmlight");
  raw.label = "1";
  raw.given = {"label"};
  EXPECT_EQ(OpenSource(raw).status().message(), "--label: " + dir.Sub("a9a") + " is a LIBSVM file (each line its "
                                                "label, then index:value features), which has no columns to name");
}

TEST(TablesAsSaved, LibsvmLinesAreMadeDenseAndTheirLabelsClasses) {
  TempDir dir;
  testing::WriteFile(dir.Sub("a9a"), "-1 1:1 3:0.5 \n+1 2:2 # a comment\n-1 4:x\n+1 5:1\n");
  auto source = OpenSvmlightSource(dir.Sub("a9a"), CsvOptions());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"-1", "1"}));
  const SplitSource& rows = *source->splits[0];
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(RowOf(rows, 0), "1 0 0.5 0 0 -> 0");
  EXPECT_EQ(RowOf(rows, 1), "0 2 0 0 0 -> 1");
  EXPECT_EQ(RowOf(rows, 2), "'4:x' is no index:value feature");
  EXPECT_EQ(rows.ItemName(2), dir.Sub("a9a") + ":3");
  // Indices from 0 where the file has a 0 (scikit-learn's dump_svmlight_file writes them so).
  testing::WriteFile(dir.Sub("zero"), "1 0:1 2:3\n0 1:1\n");
  auto zero = OpenSvmlightSource(dir.Sub("zero"), CsvOptions());
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->info.element_names.at("features"), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(RowOf(*zero->splits[0], 0), "1 0 3 -> 1");
  // The held-out file (a9a.t, whose largest index is smaller) --like the db: as many features; one past them rejected.
  CsvOptions like;
  like.like.path = "a9a.db";
  like.like.named = "--like a9a.db";
  like.like.feature_names = {"1", "2", "3", "4", "5", "6"};
  like.like.class_names = {"-1", "1"};
  testing::WriteFile(dir.Sub("a9a.t"), "+1 2:1\n-1 7:1\n");
  auto held_out = OpenSvmlightSource(dir.Sub("a9a.t"), like);
  ASSERT_TRUE(held_out.ok()) << held_out.status().ToString();
  EXPECT_EQ(RowOf(*held_out->splits[0], 0), "0 1 0 0 0 0 -> 1");
  EXPECT_EQ(RowOf(*held_out->splits[0], 1), "feature index 7 is outside the db's 1..6");
  like.like.feature_names = {"age", "fare"};
  EXPECT_EQ(OpenSvmlightSource(dir.Sub("a9a.t"), like).status().message(),
            "--like a9a.db: its features are no LIBSVM file's indices ('age', ...)");
}

TEST(TablesAsSaved, LibsvmFilesOfOtherTasksAreNamed) {
  TempDir dir;
  testing::WriteFile(dir.Sub("multi"), "1,3 1:0.5\n");
  EXPECT_EQ(OpenSvmlightSource(dir.Sub("multi"), CsvOptions()).status().message(),
            dir.Sub("multi") + ":1: '1,3': several labels a line (multi-label) are not read; write the samples "
                               "with a multi-hot field from Python (granary.write)");
  testing::WriteFile(dir.Sub("rank"), "3 qid:1 1:0.5\n");
  EXPECT_NE(OpenSvmlightSource(dir.Sub("rank"), CsvOptions()).status().message().find("'qid:' (a ranking query)"),
            std::string::npos);
  testing::WriteFile(dir.Sub("housing"), "24.0 1:0.00632 2:18\n21.6 1:0.02731\n");
  EXPECT_NE(OpenSvmlightSource(dir.Sub("housing"), CsvOptions()).status().message().find(
                "a regression target, not classes: --regression reads it"), std::string::npos);
  CsvOptions regression;
  regression.regression = true;
  auto prices = OpenSvmlightSource(dir.Sub("housing"), regression);
  ASSERT_TRUE(prices.ok()) << prices.status().ToString();
  granary::Sample s;
  ASSERT_TRUE(prices->splits[0]->Produce(1, &s).ok());
  float target = 0;
  std::memcpy(&target, s.fields[1].data(), sizeof(target));
  EXPECT_FLOAT_EQ(target, 21.6f);
  // Compressed, a LIBSVM file is not found by its lines (looked for in plain text): named, with the command.
  const std::string lines = "-1 3:1 11:1\n+1 5:1 7:1\n";  // read as a table of 3 columns between spaces
  gzFile gz = gzopen(dir.Sub("a9a.gz").c_str(), "wb");
  ASSERT_EQ(gzwrite(gz, lines.data(), static_cast<unsigned>(lines.size())), static_cast<int>(lines.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  EXPECT_EQ(OpenCsvSource(dir.Sub("a9a.gz"), CsvOptions()).status().message(),
            dir.Sub("a9a.gz") + ": holds LIBSVM lines ('-1 3:1 11:1'), gzip-compressed: decompress it first " +
                "(gunzip -k " + dir.Sub("a9a.gz") + ") and build from the file it gives");
  testing::WriteFile(dir.Sub("wide"), "1 1:1 200000:1\n");
  EXPECT_NE(OpenSvmlightSource(dir.Sub("wide"), CsvOptions()).status().message().find(
                "a LIBSVM file of 200000 features (its largest index): prep stores features dense"), std::string::npos);
}

TEST(TablesAsSaved, ArffFilesAreReadByTheirAttributesAndData) {
  const std::string arff = "% 1. Title: Iris Plants Database\n%\n@RELATION iris\n\n@ATTRIBUTE 'sepal length' REAL\n"
                           "@ATTRIBUTE sepalwidth\tNUMERIC\n@ATTRIBUTE species {Iris-setosa,'Iris virginica'}\n\n"
                           "@DATA\n5.1,3.5,Iris-setosa\n% a comment between rows\n4.9,3.0,Iris-setosa\r\n"
                           "6.3,?,'Iris virginica'\n";
  EXPECT_TRUE(StartsArff(arff));
  EXPECT_FALSE(StartsArff("a,b,label\n@relation,1,2\n"));
  // The rows after @data parse alike in any pieces: ' quotes as well as ", '%' lines no rows.
  const auto rows = [](const std::string& text, size_t piece) {
    std::vector<std::pair<uint64_t, std::vector<std::string>>> out;
    CsvParser parser;
    parser.Reset(10);
    parser.SetArff(true);
    const auto on_row = [&](const CsvParser::Row& r) {
      out.emplace_back(r.line, *r.fields);
      return Status::OK();
    };
    for (size_t at = 0; at < text.size(); at += piece) (void)parser.Feed(text.substr(at, piece), on_row);
    (void)parser.End("t.arff", on_row);
    return out;
  };
  const std::string data = "1,'a, b'\n% 'c\n\"2\",'it''s'\r\n%\n3,x";
  const std::vector<std::pair<uint64_t, std::vector<std::string>>> expected = {
      {10, {"1", "a, b"}}, {12, {"2", "it's"}}, {14, {"3", "x"}}};
  for (size_t piece : {1, 2, 5, 100}) EXPECT_EQ(rows(data, piece), expected) << piece;
  TempDir dir;
  testing::WriteFile(dir.Sub("iris.arff"), arff);
  CsvOptions o;
  o.missing = MissingPolicy::kNaN;
  auto source = OpenCsvSource(dir.Sub("iris.arff"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"sepal length", "sepalwidth"}));
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"Iris virginica", "Iris-setosa"}));
  const SplitSource& split = *source->splits[0];
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(RowOf(split, 1), "4.9 3 -> 1");
  EXPECT_EQ(RowOf(split, 2), "6.3 nan -> 0");
  EXPECT_EQ(split.ItemName(2), dir.Sub("iris.arff") + ":13");  // the file's line, its comments counted
  EXPECT_EQ(source->info.notes[0],
            "label column 'species' (the ARFF file's last attribute, Weka's class; --label picks another)");
  // An attribute named like a label is the label wherever it is.
  testing::WriteFile(dir.Sub("c.arff"), "@relation c\n@attribute class {a,b}\n@attribute x real\n@data\na,1\nb,2\n");
  auto named = OpenCsvSource(dir.Sub("c.arff"), CsvOptions());
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->info.element_names.at("features"), (std::vector<std::string>{"x"}));
  // What is not read is named.
  testing::WriteFile(dir.Sub("sparse.arff"), "@relation s\n@attribute a real\n@attribute y {p,q}\n@data\n{0 1, 1 q}\n");
  EXPECT_EQ(OpenCsvSource(dir.Sub("sparse.arff"), CsvOptions()).status().message(),
            dir.Sub("sparse.arff") + ":5: sparse ARFF rows ({index value, ...}) are not read: write it dense (Weka's "
                                     "SparseToNonSparse filter) first");
  testing::WriteFile(dir.Sub("nodata.arff"), "@relation s\n@attribute a real\n1\n");
  EXPECT_EQ(OpenCsvSource(dir.Sub("nodata.arff"), CsvOptions()).status().message(),
            dir.Sub("nodata.arff") + ": an ARFF file without an @data line");
  testing::WriteFile(dir.Sub("rel.arff"), "@relation s\n@attribute bag relational\n@end bag\n@data\n");
  EXPECT_NE(OpenCsvSource(dir.Sub("rel.arff"), CsvOptions()).status().message().find("a relational attribute ('bag')"),
            std::string::npos);
}

}  // namespace
}  // namespace granary
