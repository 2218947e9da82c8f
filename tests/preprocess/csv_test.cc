#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "preprocess/build.h"
#include "preprocess/csv_table.h"
#include "preprocess/field_statistics.h"
#include "preprocess/inspect.h"
#include "preprocess/source.h"
#include "store/db.h"
#include "tests/preprocess/cancelling_split.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

std::vector<float> Features(const SplitSource& split, uint64_t i, int64_t* label) {
  Sample s;
  Status st = split.Produce(i, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<float> f(s.fields[0].size() / 4);
  std::memcpy(f.data(), s.fields[0].data(), s.fields[0].size());
  std::memcpy(label, s.fields[1].data(), 8);
  return f;
}

// Every row's label, in order.
std::vector<int64_t> LabelsOf(const SplitSource& split) {
  std::vector<int64_t> labels(split.size());
  for (uint64_t i = 0; i < split.size(); ++i) Features(split, i, &labels[i]);
  return labels;
}

TEST(Csv, StringLabelsBecomeSortedClassesAndQuotingWorks) {
  TempDir dir;
  testing::WriteFile(dir.Sub("t.csv"),
                     "a,\"b, quoted\",kind\r\n"
                     "1.5,2,dog\r\n"
                     "\n"
                     "-3e2, \"4\" ,cat\r\n"
                     "\"5\",\"6\",\"bird\"\n");
  CsvOptions o;
  o.label = "kind";
  auto source = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"bird", "cat", "dog"}));
  EXPECT_EQ(source->info.schema.fields[0].shape, (Shape{2}));
  const SplitSource& split = *source->splits[0];
  ASSERT_EQ(split.size(), 3u);
  int64_t label;
  EXPECT_EQ(Features(split, 0, &label), (std::vector<float>{1.5f, 2.0f}));
  EXPECT_EQ(label, 2);
  EXPECT_EQ(Features(split, 1, &label), (std::vector<float>{-300.0f, 4.0f}));
  EXPECT_EQ(label, 1);
  EXPECT_EQ(split.ItemName(1), dir.Sub("t.csv") + ":4");
  for (const std::string& note : source->info.notes) EXPECT_EQ(note.find("differ only in case"), std::string::npos);
  // Labels spelt two ways ("Cat", "cat") stay classes of their own, noted.
  testing::WriteFile(dir.Sub("case.csv"), "x,label\n1,Cat\n2,cat\n3,Dog\n4,dog\n5,DOG\n6,bird\n");
  auto cased = OpenCsvSource(dir.Sub("case.csv"), CsvOptions());
  ASSERT_TRUE(cased.ok()) << cased.status().ToString();
  EXPECT_EQ(cased->info.class_names, (std::vector<std::string>{"Cat", "DOG", "Dog", "bird", "cat", "dog"}));
  // Lists of tags (Planet's Amazon labels: "clear primary water") are noted: each combination became a class;
  // classes whose names have two words ("golden retriever") are not.
  std::string tagged = "x,tags\n", breeds = "x,breed\n";
  const char* tags[] = {"clear", "haze", "primary", "water", "road"};
  for (int i = 0; i < 40; ++i) {
    tagged += std::to_string(i) + "," + tags[i % 2] + " " + tags[2 + i % 3] +
              (i % 4 ? std::string(" ") + tags[i % 5] : "") + "\n";
    breeds += std::to_string(i) + ",breed" + std::to_string(i % 12) + " dog" + std::to_string(i % 12) + "\n";
  }
  testing::WriteFile(dir.Sub("tags.csv"), tagged);
  testing::WriteFile(dir.Sub("breeds.csv"), breeds);
  CsvOptions tagged_options;
  tagged_options.label = "tags";
  auto lists = OpenCsvSource(dir.Sub("tags.csv"), tagged_options);
  ASSERT_TRUE(lists.ok()) << lists.status().ToString();
  const auto noted = [](const Source& source, const std::string& text) {
    return std::any_of(source.info.notes.begin(), source.info.notes.end(),
                       [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(noted(lists.value(), "column 'tags' holds lists of tags ('clear primary', ...: 5 tags in"));
  EXPECT_TRUE(noted(lists.value(), "write a multi-hot field with granary.write"));
  tagged_options.label = "breed";
  auto named = OpenCsvSource(dir.Sub("breeds.csv"), tagged_options);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_FALSE(noted(named.value(), "lists of tags"));
  EXPECT_NE(std::find(cased->info.notes.begin(), cased->info.notes.end(),
                      "column 'label' holds labels that differ only in case ('Cat', 'cat'; 'DOG', 'Dog', 'dog'): "
                      "each is a class of its own; where they mean one, spell them one way in the table (pandas: "
                      "df['label'] = df['label'].str.lower())"),
            cased->info.notes.end());
}

// Integer labels are class indices when dense (a class may be absent);
// sparse ones become classes in numeric order, named by their values, so a
// label of 594082 does not make 594083 classes (a fuzz run's finding).
TEST(Csv, DenseIntegerLabelsAreIndicesSparseOnesAreRenumbered) {
  TempDir dir;
  testing::WriteFile(dir.Sub("dense.csv"), "x,label\n1,0\n2,3\n3,3\n");
  testing::WriteFile(dir.Sub("sparse.csv"), "x,label\n1,594082\n2,17\n3,017\n4,100\n");
  CsvOptions o;
  o.label = "label";
  auto dense = OpenCsvSource(dir.Sub("dense.csv"), o);
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_EQ(dense->info.class_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  int64_t label;
  Features(*dense->splits[0], 1, &label);
  EXPECT_EQ(label, 3);

  auto sparse = OpenCsvSource(dir.Sub("sparse.csv"), o);
  ASSERT_TRUE(sparse.ok()) << sparse.status().ToString();
  EXPECT_EQ(sparse->info.class_names, (std::vector<std::string>{"17", "100", "594082"}));
  EXPECT_EQ(sparse->info.num_classes, 3);
  EXPECT_EQ(LabelsOf(*sparse->splits[0]), (std::vector<int64_t>{2, 0, 0, 1}));
}

// Integral labels spelled as floats (pandas writes an integer column that
// held a NaN as 0.0 .. 11.0) are ordered by value, not as strings ("10.0"
// is class 10, not 2); negative ones too (-1 and 1 are classes 0 and 1);
// hex and fractions stay strings.
TEST(Csv, IntegralLabelsAreOrderedByValueHoweverSpelled) {
  TempDir dir;
  std::string floats = "x,label\n";
  for (int i = 11; i >= 0; --i) floats += std::to_string(i) + "," + std::to_string(i) + ".0\n";
  testing::WriteFile(dir.Sub("floats.csv"), floats);
  testing::WriteFile(dir.Sub("signs.csv"), "x,label\n1,1\n2,-1\n3,1e0\n");
  testing::WriteFile(dir.Sub("hex.csv"), "x,label\n1,0x1b\n2,2.5\n3,1\n");
  CsvOptions o;
  o.label = "label";
  auto source = OpenCsvSource(dir.Sub("floats.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ(source->info.num_classes, 12);
  EXPECT_EQ(source->info.class_names[10], "10");
  EXPECT_EQ(LabelsOf(*source->splits[0]), (std::vector<int64_t>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  int64_t label;
  auto signs = OpenCsvSource(dir.Sub("signs.csv"), o);
  ASSERT_TRUE(signs.ok()) << signs.status().ToString();
  EXPECT_EQ(signs->info.class_names, (std::vector<std::string>{"-1", "1"}));
  Features(*signs->splits[0], 2, &label);
  EXPECT_EQ(label, 1);
  auto hex = OpenCsvSource(dir.Sub("hex.csv"), o);
  ASSERT_TRUE(hex.ok()) << hex.status().ToString();
  EXPECT_EQ(hex->info.class_names, (std::vector<std::string>{"0x1b", "1", "2.5"}));
  // Numbers that are not all integers are a regression target, refused; a
  // class per row is noted.
  std::string prices = "rooms,price\n", ids = "x,id\n";
  for (int i = 0; i < 120; ++i) {
    prices += std::to_string(i % 5) + "," + std::to_string(1000 + i) + (i == 7 ? ".5\n" : "\n");
    ids += std::to_string(i % 5) + "," + std::to_string(i * 13) + "\n";
  }
  testing::WriteFile(dir.Sub("prices.csv"), prices);
  o.label = "price";
  EXPECT_EQ(OpenCsvSource(dir.Sub("prices.csv"), o).status().message(),
            dir.Sub("prices.csv") + ": column 'price' holds numbers that are not integers (1007.5, ...): a regression "
                                    "target, not classes: --regression reads it as a number to predict (train fits "
                                    "it with mean squared error; a row whose value is no number is rejected), or "
                                    "--label picks another column");
  // Integers of a class per row (an id, a price in whole units: Kaggle's SalePrice) are no classes either.
  testing::WriteFile(dir.Sub("ids.csv"), ids);
  o.label = "id";
  EXPECT_EQ(OpenCsvSource(dir.Sub("ids.csv"), o).status().message(),
            dir.Sub("ids.csv") + ": column 'id' holds 120 classes for 120 rows: a number to predict (a price, a "
                                 "count) or an id, not classes: --regression reads it as a number to predict (train "
                                 "fits it with mean squared error; a row whose value is no number is rejected), or "
                                 "--label picks another column");
  // Text labels so many are only noted (a labels table's too): names are classes however many.
  for (size_t at = ids.find('\n'); (at = ids.find(',', at + 1)) != std::string::npos;) ids.insert(at + 1, "n");
  testing::WriteFile(dir.Sub("names.csv"), ids);
  auto per_row = OpenCsvSource(dir.Sub("names.csv"), o);
  ASSERT_TRUE(per_row.ok()) << per_row.status().ToString();
  EXPECT_NE(per_row->info.notes.back().find("holds 120 classes for 120 rows"), std::string::npos);
}

// Tables as people keep them get a diagnosis, not "no column": CR-only line
// ends read; UTF-16 and ';'-separated files named as such, with the columns
// found; duplicate and unnamed columns named; hex and inf refused saying why;
// a file named PLAIN.CSV is a table.
TEST(Csv, TablesAsPeopleKeepThemAreReadOrDiagnosed) {
  TempDir dir;
  CsvOptions o;
  o.label = "target";
  o.missing = MissingPolicy::kNaN;
  testing::WriteFile(dir.Sub("cr.csv"), "a,b,target\r1,2,0\r3,4,1\r");
  auto cr = OpenCsvSource(dir.Sub("cr.csv"), o);
  ASSERT_TRUE(cr.ok()) << cr.status().ToString();
  EXPECT_EQ(cr->splits[0]->size(), 2u);
  const std::pair<std::string, std::string> refused[] = {
      {std::string("\xFF\xFE" "a\0,\0t\0", 8), "is UTF-16"},
      {"a,a,target\n1,2,0\n", "columns 1 and 2 are both named 'a'"},
      {"a,b,target,\n1,2,0,\n", "column 4 of 4 has no name (a trailing comma on the header line?)"},
      {"x,y\n1,2\n", "no column 'target' for --label (the header's columns: 'x', 'y')"}};
  for (const auto& [text, message] : refused) {
    testing::WriteFile(dir.Sub("t.csv"), text);
    auto s = OpenCsvSource(dir.Sub("t.csv"), o);
    ASSERT_FALSE(s.ok()) << message;
    EXPECT_NE(s.status().message().find(message), std::string::npos) << s.status().ToString();
  }
  testing::WriteFile(dir.Sub("v.csv"), "a,b,target\n0x1b,2,0\ninf,2,0\n1,2,0\n");
  auto values = OpenCsvSource(dir.Sub("v.csv"), o);
  ASSERT_TRUE(values.ok());
  Sample sample;
  Status hex = values->splits[0]->Produce(0, &sample);
  EXPECT_NE(hex.message().find("not hexadecimal"), std::string::npos) << hex.ToString();
  Status inf = values->splits[0]->Produce(1, &sample);
  EXPECT_NE(inf.message().find("features must be finite"), std::string::npos) << inf.ToString();
  EXPECT_TRUE(values->splits[0]->Produce(2, &sample).ok());
  testing::WriteFile(dir.Sub("PLAIN.CSV"), "a,target\n1,0\n");
  EXPECT_EQ(DetectFormat(dir.Sub("PLAIN.CSV")), "csv");
}

TEST(Csv, BadRowsAreRejectedWithFileLineAndReason) {
  TempDir dir;
  testing::WriteFile(dir.Sub("t.csv"), "x,y,label\n1,2,0\n1,abc,1\n1,2\n1,,1\n1,2,\n3,4,1\n");
  CsvOptions o;
  o.label = "label";
  auto source = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"0", "1"}));
  BuildOptions b;
  b.db_path = dir.Sub("db");
  b.max_reject_fraction = 0.9;
  auto summary = BuildDb(source.value(), b);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->splits[0].written, 2u);
  ASSERT_EQ(summary->rejected.size(), 4u);
  const std::string f = dir.Sub("t.csv");
  EXPECT_EQ(summary->rejected[0].item, f + ":3");
  EXPECT_NE(summary->rejected[0].reason.find("'abc' is not a number"), std::string::npos);
  EXPECT_EQ(summary->rejected[1].item, f + ":4");
  EXPECT_NE(summary->rejected[1].reason.find("2 fields, the header has 3"), std::string::npos);
  EXPECT_NE(summary->rejected[2].reason.find("missing value"), std::string::npos);
  EXPECT_NE(summary->rejected[3].reason.find("label"), std::string::npos);
}

// CSV edge cases, each now consistent with the rest of prep.
TEST(Csv, ByteOrderMarkEmptyTablesOutOfRangeNumbersAndDuplicateLabels) {
  TempDir dir;
  CsvOptions o;
  o.label = "label";
  // A UTF-8 byte order mark is not part of the first column's name.
  testing::WriteFile(dir.Sub("bom.csv"), "\xEF\xBB\xBFlabel,x\n1,2\n0,3\n");
  auto bom = OpenCsvSource(dir.Sub("bom.csv"), o);
  ASSERT_TRUE(bom.ok()) << bom.status().ToString();
  EXPECT_EQ(bom->splits[0]->size(), 2u);
  // A header without rows is an error, as an empty image folder is.
  testing::WriteFile(dir.Sub("empty.csv"), "x,label\n");
  auto empty = OpenCsvSource(dir.Sub("empty.csv"), o);
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("empty.csv: a header and no data rows"), std::string::npos)
      << empty.status().message();
  // The same column named twice: which one is the label is not guessed.
  testing::WriteFile(dir.Sub("twice.csv"), "label,x,label\n1,2,3\n");
  auto twice = OpenCsvSource(dir.Sub("twice.csv"), o);
  EXPECT_NE(twice.status().message().find("the header has the column twice (1 and 3)"), std::string::npos)
      << twice.status().message();
  // 1e39 (beyond float32) is refused as inf is, not stored as +inf.
  testing::WriteFile(dir.Sub("big.csv"), "x,label\n1e39,1\ninf,0\n-1e39,1\n3.4e38,0\n1e-50,1\n");
  auto big = OpenCsvSource(dir.Sub("big.csv"), o);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  Sample sample;
  for (uint64_t i : {0, 1, 2}) {
    Status s = big->splits[0]->Produce(i, &sample);
    EXPECT_NE(s.message().find("is not a number float32 can hold"), std::string::npos) << i << ": " << s.message();
  }
  int64_t label;
  EXPECT_EQ(Features(*big->splits[0], 3, &label), std::vector<float>{3.4e38f});
  EXPECT_EQ(Features(*big->splits[0], 4, &label), std::vector<float>{0.0f});  // underflows to zero, as float32 does
}

TEST(Csv, MissingValuesFollowThePolicy) {
  TempDir dir;
  testing::WriteFile(dir.Sub("t.csv"), "x,y,label\nNA,2,0\n");
  for (MissingPolicy p : {MissingPolicy::kNaN, MissingPolicy::kZero}) {
    CsvOptions o;
    o.label = "label";
    o.missing = p;
    auto source = OpenCsvSource(dir.Sub("t.csv"), o);
    ASSERT_TRUE(source.ok());
    int64_t label;
    std::vector<float> f = Features(*source->splits[0], 0, &label);
    EXPECT_TRUE(p == MissingPolicy::kNaN ? std::isnan(f[0]) : f[0] == 0.0f);
  }
}

// `prep cat --json` of a CSV record: exact floats, and NaN (which JSON has
// no number for) as a string rather than a crash.
TEST(Csv, CatPrintsExactValuesAndNaNAsJson) {
  TempDir dir;
  testing::WriteFile(dir.Sub("t.csv"), "x,y,label\n0.1,,dog\n");
  CsvOptions o;
  o.label = "label";
  o.missing = MissingPolicy::kNaN;
  auto source = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  BuildOptions b;
  b.db_path = dir.Sub("db");
  ASSERT_TRUE(BuildDb(source.value(), b).ok());
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto text = DescribeRecord(*db.value(), CatOptions(), /*json=*/true);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const nlohmann::json j = nlohmann::json::parse(text.value());
  const nlohmann::json& values = j["fields"]["features"]["values"];
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].get<double>(), static_cast<double>(0.1f));
  EXPECT_EQ(values[1], "NaN");
  EXPECT_EQ(j["class_name"], "dog");
}

TEST(Csv, FolderSplitsMustShareAHeaderAndNameTheLabel) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train.csv"), "x,label\n1,0\n2,1\n");
  testing::WriteFile(dir.Sub("test.csv"), "x,label\n3,1\n");
  CsvOptions o;
  o.label = "label";
  auto source = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ(source->splits.size(), 2u);
  EXPECT_EQ(source->splits[1]->name(), "test");
  testing::WriteFile(dir.Sub("test.csv"), "x,kind\n3,1\n");
  EXPECT_NE(OpenCsvSource(dir.path(), o).status().message().find("header differs"), std::string::npos);
  o.label = "nope";
  EXPECT_NE(OpenCsvSource(dir.Sub("train.csv"), o).status().message().find("no column 'nope'"), std::string::npos);
  o.label = "";  // the column named like a label
  auto found = OpenCsvSource(dir.Sub("train.csv"), o);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->info.options.at("label"), "label");
}

// Tables as spreadsheets and other tools write them: separated by ';' (where
// the decimal separator is a comma), tabs or '|', found from the header; the
// label column found by its name; each finding noted and recorded, so a
// build given them as flags is the same build.
TEST(Csv, TheDelimiterAndTheLabelColumnAreFoundFromTheHeader) {
  EXPECT_EQ(DetectCsvDelimiter("a,b,label\n1;2;3"), ',');
  EXPECT_EQ(DetectCsvDelimiter("a;b;label\r\n1,5;2;3"), ';');
  EXPECT_EQ(DetectCsvDelimiter("\"a,b\";c;label\n"), ';');  // a quoted comma is no delimiter
  EXPECT_EQ(DetectCsvDelimiter("a\tb\tlabel\n"), '\t');
  EXPECT_EQ(DetectCsvDelimiter("a|b|c;d\n"), '|');
  EXPECT_EQ(DetectCsvDelimiter("label\n1\n"), ',');
  TempDir dir;
  testing::WriteFile(dir.Sub("train.csv"), "\xEF\xBB\xBFx;\"y;z\";Target\n1.5;2;cat\n3;4e1;dog\n5;6;cat\n");
  testing::WriteFile(dir.Sub("test.csv"), "x;\"y;z\";Target\n7;8;dog\n");
  CsvOptions o;
  auto semicolons = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(semicolons.ok()) << semicolons.status().ToString();
  EXPECT_EQ(semicolons->info.notes,
            (std::vector<std::string>{"label column 'Target' (the column named like a label; --label picks another)",
                                      "columns separated by ';' (found in the header; --delimiter gives another)"}));
  EXPECT_EQ(semicolons->info.options, (std::map<std::string, std::string>{{"label", "Target"}, {"delimiter", ";"}}));
  EXPECT_EQ(semicolons->info.class_names, (std::vector<std::string>{"cat", "dog"}));
  int64_t label = -1;
  EXPECT_EQ(Features(*semicolons->splits[0], 1, &label), (std::vector<float>{3, 40}));
  EXPECT_EQ(label, 1);
  EXPECT_EQ(Features(*semicolons->splits[1], 0, &label), (std::vector<float>{7, 8}));  // test.csv: the same reading
  o.label = "Target";
  o.delimiter = ';';
  auto given = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(given.ok());
  EXPECT_TRUE(given->info.notes.empty());
  RawOptions raw;  // as prep build records them: found or given, the same options
  raw.raw = dir.path();
  auto found_by_prep = OpenSource(raw);
  raw.label = "Target";
  raw.delimiter = ";";
  auto given_to_prep = OpenSource(raw);
  ASSERT_TRUE(found_by_prep.ok() && given_to_prep.ok());
  EXPECT_EQ(found_by_prep->info.options, given_to_prep->info.options);
  EXPECT_EQ(found_by_prep->info.options.at("delimiter"), ";");
  raw.delimiter = "\\t";
  EXPECT_NE(OpenSource(raw).status().message().find("--delimiter \\t: expected auto, ',', ';', tab, '|' or whitespace"),
            std::string::npos);

  testing::WriteFile(dir.Sub("xy.csv"), "x,y,class\n1,2,0\n");  // y is a feature beside a column named class
  auto xy = OpenCsvSource(dir.Sub("xy.csv"), CsvOptions{});
  ASSERT_TRUE(xy.ok()) << xy.status().ToString();
  EXPECT_EQ(xy->info.options.at("label"), "class");
  testing::WriteFile(dir.Sub("t.tsv"), "a\tb\ty\n1\t2\t0\n");
  auto tabs = OpenCsvSource(dir.Sub("t.tsv"), CsvOptions{});
  ASSERT_TRUE(tabs.ok()) << tabs.status().ToString();
  EXPECT_EQ(tabs->info.notes[1], "columns separated by tab (found in the header; --delimiter gives another)");
  EXPECT_EQ(tabs->info.options.at("delimiter"), "tab");

  struct Refused {
    std::string text, label;
    char delimiter;
    std::string message;
  };
  const Refused refused[] = {
      {"a;b;label\n1;2;0\n", "label", ',', "no column 'label' for --label (the header's columns: 'a;b;label'); the "
                                           "header is one column holding ';': give --delimiter ';'"},
      {"a;b;label\n1;2;0\n", "", ',', "give --label COLUMN: no column is named label, target, class or y (the "
                                      "header's columns: 'a;b;label'); the header is one column holding ';': give "
                                      "--delimiter ';'"},
      {"a,b,c\n1,2,0\n", "", 0, "give --label COLUMN: no column is named label, target, class or y (the header's "
                                "columns: 'a', 'b', 'c')"},
      {"a,Label,labels\n1,2,0\n", "", 0, "give --label COLUMN: columns 'Label' and 'labels' are both named like a "
                                         "label"}};
  for (const Refused& r : refused) {
    testing::WriteFile(dir.Sub("r.csv"), r.text);
    CsvOptions options;
    options.label = r.label;
    options.delimiter = r.delimiter;
    auto s = OpenCsvSource(dir.Sub("r.csv"), options);
    EXPECT_NE(s.status().message().find(r.message), std::string::npos) << s.status().ToString();
  }
  // A decimal comma where the table's numbers are read with points is named as one, with the flag that reads it.
  testing::WriteFile(dir.Sub("comma.csv"), "a;label\n1,5;0\n");
  CsvOptions points;
  points.decimal = '.';
  auto decimal = OpenCsvSource(dir.Sub("comma.csv"), points);
  ASSERT_TRUE(decimal.ok());
  Sample sample;
  const Status rejected = decimal->splits[0]->Produce(0, &sample);
  EXPECT_NE(rejected.message().find("'1,5' is not a number float32 can hold (a decimal comma, where this table's "
                                    "numbers are read with a decimal point: --decimal comma reads commas)"),
            std::string::npos)
      << rejected.message();
}

// A ';'-separated table whose numbers have decimal commas (a spreadsheet's CSV in many locales) is read so,
// features and a regression target alike, noted and recorded; one with points, or separated by ',', is not.
TEST(Csv, DecimalCommasOfASpreadsheetsTableAreReadAsDecimalMarks) {
  EXPECT_EQ(DetectCsvDecimal("a;b;label\n1,5;-0,25;0\n2;3;1\n", ';'), ',');
  EXPECT_EQ(DetectCsvDecimal("a\tlabel\n\"1,5\"\t0\r\n", '\t'), ',');
  EXPECT_EQ(DetectCsvDecimal("a;b;label\n1,5;2.5;0\n", ';'), '.');  // both: as written elsewhere, points
  EXPECT_EQ(DetectCsvDecimal("a;b;label\n1;2;0\n", ';'), '.');
  EXPECT_EQ(DetectCsvDecimal("a,b,label\n\"1,5\",2,0\n", ','), '.');
  EXPECT_EQ(DetectCsvDecimal("a;label\nx,y;0\n1,5", ';'), '.');  // words, and a last line that may be cut
  TempDir dir;
  testing::WriteFile(dir.Sub("preise.csv"), "fläche;zimmer;preis\n52,5;2;210000,50\n71,25;3;289500\n");
  CsvOptions options;
  options.label = "preis";
  options.regression = true;
  auto source = OpenCsvSource(dir.Sub("preise.csv"), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Sample sample;
  ASSERT_TRUE(source->splits[0]->Produce(0, &sample).ok());
  float values[3];
  std::memcpy(values, sample.fields[0].data(), 2 * sizeof(float));
  std::memcpy(values + 2, sample.fields[1].data(), sizeof(float));
  EXPECT_EQ(std::vector<float>(values, values + 3), (std::vector<float>{52.5f, 2.0f, 210000.5f}));
  EXPECT_EQ(source->info.options["decimal"], "comma");
  EXPECT_NE(source->info.notes[0].find("numbers written with a decimal comma"), std::string::npos);
  options.decimal = '.';  // --decimal point: each refused
  auto points = OpenCsvSource(dir.Sub("preise.csv"), options);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  EXPECT_NE(points->splits[0]->Produce(0, &sample).message().find("--decimal comma reads commas"), std::string::npos);
  EXPECT_EQ(points->info.options.count("decimal"), 0u);
}

// The manifest holds each split's feature statistics over the rows written
// (rejected rows left out, NaN counted apart), as computed here from the
// float32 values; a build interrupted and resumed records the same.
TEST(Csv, FeatureStatisticsAreRecordedAndSurviveAResume) {
  TempDir dir;
  std::mt19937 rng(5);
  std::string text = "a,b,never,label\n";
  std::vector<std::vector<float>> written;  // the rows' features, as float32
  for (int i = 0; i < 3000; ++i) {
    const float a = static_cast<float>(std::normal_distribution<double>(100, 3)(rng));
    const bool missing = rng() % 10 == 0, bad = rng() % 50 == 0;
    const float b = static_cast<float>(rng() % 1000) / 7;
    char row[96];
    std::snprintf(row, sizeof(row), "%.9g,%s,NA,%s\n", a, missing ? "" : std::to_string(b).c_str(),
                  bad ? "" : "cat");
    text += row;
    if (!bad) written.push_back({a, missing ? std::nanf("") : std::stof(std::to_string(b)), std::nanf("")});
  }
  testing::WriteFile(dir.Sub("t.csv"), text);
  CsvOptions co;
  co.label = "label";
  co.missing = MissingPolicy::kNaN;
  BuildOptions o;
  o.max_reject_fraction = 0.1;
  o.block_bytes = 3000;
  o.records_per_commit = 2;
  o.db_path = dir.Sub("db");
  auto source = OpenCsvSource(dir.Sub("t.csv"), co);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_TRUE(BuildDb(source.value(), o).ok());
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(db.value()->manifest().statistics.count("train"), 1u);
  const FieldStatistics s = db.value()->manifest().statistics.at("train").at("features");
  EXPECT_EQ(s.samples, written.size());
  for (size_t e = 0; e < 3; ++e) {
    long double sum = 0, sum_sq = 0;
    uint64_t present = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& r : written) {
      if (std::isnan(r[e])) continue;
      ++present;
      sum += r[e];
      lo = std::min<double>(lo, r[e]);
      hi = std::max<double>(hi, r[e]);
    }
    EXPECT_EQ(s.missing[e], written.size() - present) << "element " << e;
    if (present == 0) {  // "never": no value present
      EXPECT_TRUE(std::isnan(s.mean[e]) && std::isnan(s.stddev[e]) && std::isnan(s.min[e]) && std::isnan(s.max[e]));
      continue;
    }
    const long double mean = sum / present;
    for (const auto& r : written) sum_sq += std::isnan(r[e]) ? 0 : (r[e] - mean) * (r[e] - mean);
    EXPECT_NEAR(s.mean[e], static_cast<double>(mean), 1e-12 * std::fabs(static_cast<double>(mean)));
    EXPECT_NEAR(s.stddev[e], std::sqrt(static_cast<double>(sum_sq / present)), 1e-9) << "element " << e;
    EXPECT_EQ(s.min[e], lo);
    EXPECT_EQ(s.max[e], hi);
  }

  std::atomic<bool> cancel{false};
  Source interrupted;
  interrupted.info = source->info;
  interrupted.splits.push_back(std::make_unique<testing::CancellingSplit>(*source->splits[0], 1700, &cancel));
  BuildOptions first = o;
  first.db_path = dir.Sub("resumed");
  first.cancel = &cancel;
  ASSERT_FALSE(BuildDb(interrupted, first).ok());
  BuildOptions again = o;
  again.db_path = dir.Sub("resumed");
  again.resume = true;
  auto done = BuildDb(source.value(), again);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  auto resumed = DbReader::Open(dir.Sub("resumed"));
  ASSERT_TRUE(resumed.ok());
  const FieldStatistics r = resumed.value()->manifest().statistics.at("train").at("features");
  EXPECT_EQ(r.samples, s.samples);
  EXPECT_EQ(r.missing, s.missing);
  EXPECT_EQ(r.min[0], s.min[0]);
  EXPECT_EQ(r.max[1], s.max[1]);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(r.mean[e], s.mean[e], 1e-12 * std::fabs(s.mean[e]));
    EXPECT_NEAR(r.stddev[e], s.stddev[e], 1e-12 * s.stddev[e]);
  }
}

// A field that held an infinite value (granary.write takes any float) gets
// no statistics, rather than ones no model could standardise with (and a
// manifest JSON cannot hold); the other fields keep theirs.
TEST(Csv, AFieldHoldingAnInfiniteValueGetsNoStatistics) {
  Schema schema;
  schema.fields = {{"a", DType::kFloat32, {2}, ""}, {"b", DType::kFloat64, {}, ""}, {"label", DType::kInt64, {}, ""}};
  StatisticsAccumulator acc(schema);
  const auto bytes = [](auto... v) {
    std::string s;
    ((s.append(reinterpret_cast<const char*>(&v), sizeof(v))), ...);
    return s;
  };
  acc.Add({bytes(1.0f, 2.0f), bytes(3.0), bytes(int64_t{0})});
  acc.Add({bytes(INFINITY, 4.0f), bytes(5.0), bytes(int64_t{1})});
  const auto result = acc.Result();
  EXPECT_EQ(result.count("a"), 0u);
  ASSERT_EQ(result.count("b"), 1u);
  EXPECT_EQ(result.at("b").mean[0], 4.0);
  EXPECT_EQ(result.at("b").stddev[0], 1.0);
  EXPECT_EQ(result.count("label"), 0u);  // integers: none
}

}  // namespace
}  // namespace granary
