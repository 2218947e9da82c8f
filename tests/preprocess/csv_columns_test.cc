// A CSV table's text columns (as every real table has: Sex, Embarked,
// color) one-hot encoded, an id or free-text column refused with the way
// out (a numeric id noted), and --drop; the features' element names
// recorded in the manifest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "preprocess/build.h"
#include "preprocess/source.h"
#include "store/db.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// Row `i`'s features, or the reason it is rejected.
std::string FeaturesOf(const SplitSource& split, uint64_t i) {
  Sample s;
  if (Status st = split.Produce(i, &s); !st.ok()) return st.message();
  std::string text;
  for (size_t at = 0; at + 4 <= s.fields[0].size(); at += 4) {
    float f = 0;
    std::memcpy(&f, s.fields[0].data() + at, 4);
    text += (text.empty() ? "" : " ") + (std::isnan(f) ? std::string("nan") : std::to_string(static_cast<int>(f)));
  }
  return text;
}

TEST(CsvColumns, TextColumnsAreOneHotEncodedAndNumbersStayNumbers) {
  TempDir dir;
  // color is text (its categories include 'teal', seen only in val.csv);
  // n holds numbers and one stray word, which rejects its row alone.
  testing::WriteFile(dir.Sub("train.csv"),
                     "n,color,label\n1,red,0\n2,blue,1\n3, red ,0\nabc,blue,1\n5,,0\n6,blue,1\n");
  testing::WriteFile(dir.Sub("val.csv"), "n,color,label\n7,teal,0\n");
  CsvOptions o;
  auto source = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"),
            (std::vector<std::string>{"n", "color=blue", "color=red", "color=teal"}));
  EXPECT_EQ(source->info.schema.fields[0].shape, (Shape{4}));
  const SplitSource& train = *source->splits[0];
  EXPECT_EQ(FeaturesOf(train, 0), "1 0 1 0");
  EXPECT_EQ(FeaturesOf(train, 1), "2 1 0 0");
  EXPECT_EQ(FeaturesOf(train, 2), "3 0 1 0");  // trimmed, as numbers are
  EXPECT_EQ(FeaturesOf(train, 3), "column 'n': 'abc' is not a number float32 can hold");
  EXPECT_EQ(FeaturesOf(train, 4), "column 'color': missing value");
  EXPECT_EQ(FeaturesOf(*source->splits[1], 0), "7 0 0 1");
  bool noted = false;
  for (const std::string& note : source->info.notes) {
    noted = noted || note == "column 'color' is text: one-hot encoded as 3 feature(s) (blue, red, teal; --drop color "
                             "leaves it out)";
  }
  EXPECT_TRUE(noted);
  // A missing category follows --missing as a number does: every element of it.
  o.missing = MissingPolicy::kNaN;
  auto nan = OpenCsvSource(dir.path(), o);
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ(FeaturesOf(*nan->splits[0], 4), "5 nan nan nan");
  o.missing = MissingPolicy::kZero;
  EXPECT_EQ(FeaturesOf(*OpenCsvSource(dir.path(), o)->splits[0], 4), "5 0 0 0");
  // A column of numbers written in a way prep refuses (a decimal comma where
  // the first rows have points) is no text: each value is refused with its reason.
  testing::WriteFile(dir.Sub("comma.csv"), "x;label\n1.5;0\n2,5;1\n");
  auto comma = OpenCsvSource(dir.Sub("comma.csv"), CsvOptions());
  ASSERT_TRUE(comma.ok()) << comma.status().ToString();
  EXPECT_NE(FeaturesOf(*comma->splits[0], 1).find("(a decimal comma"), std::string::npos);
  // So is a column of numbers with thousands separators (quoted in a ',' file).
  std::string sums = "total,label\n";
  for (int i = 0; i < 150; ++i) sums += "\"" + std::to_string(1 + i) + "," + std::to_string(100 + i) + ",000.5\"," + std::to_string(i % 2) + "\n";
  testing::WriteFile(dir.Sub("sums.csv"), sums);
  auto separated = OpenCsvSource(dir.Sub("sums.csv"), CsvOptions());
  ASSERT_TRUE(separated.ok()) << separated.status().ToString();
  EXPECT_EQ(FeaturesOf(*separated->splits[0], 0),
            "column 'total': '1,100,000.5' is not a number float32 can hold (thousands separators, or a decimal comma: "
            "prep reads numbers written as 1234.5, with a decimal point and no separators)");
}

// A column of sentences (IMDB's reviews) is free text: the refusal says where such a table goes instead.
TEST(CsvColumns, AFreeTextColumnIsRefusedNamingTheWayToATextModel) {
  TempDir dir;
  std::string table = "review,sentiment\n";
  for (int i = 0; i < 150; ++i) {
    table += "\"a film I saw, number " + std::to_string(i) + "\"," + (i % 2 ? "pos\n" : "neg\n");
  }
  testing::WriteFile(dir.Sub("t.csv"), table);
  CsvOptions o;
  o.label = "sentiment";
  auto refused = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            dir.Sub("t.csv") + ":102: column 'review' is text of over 100 distinct values (an id, a name, free "
                               "text?), too many to one-hot encode: --drop review leaves it out; its values read as "
                               "free text, and train has no model of text: write the rows from Python with "
                               "granary.write (a str is a text field, read back as str) and tokenise it in your own "
                               "script");
}

// A column of dates (sales, weather) is named as such, with the numbers to derive from it, refused or one-hot encoded.
TEST(CsvColumns, ADateColumnIsNamedWithTheNumbersToDeriveFromIt) {
  TempDir dir;
  std::string table = "day,units,label\n";
  for (int i = 0; i < 150; ++i) {
    table += "2021-" + std::string(i / 28 < 9 ? "0" : "") + std::to_string(1 + i / 28) + "-" +
             (i % 28 < 9 ? "0" : "") + std::to_string(1 + i % 28) + (i % 2 ? " 10:30:00," : ",") +
             std::to_string(i % 7) + "," + std::to_string(i % 2) + "\n";
  }
  testing::WriteFile(dir.Sub("t.csv"), table);
  const std::string advice = "; its values are dates, which a model takes better as numbers: derive them before prep "
                             "(pandas: d = pd.to_datetime(df['day']); df['year'], df['month'], df['weekday'] = "
                             "d.dt.year, d.dt.month, d.dt.weekday; then --drop day)";
  auto refused = OpenCsvSource(dir.Sub("t.csv"), CsvOptions());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            dir.Sub("t.csv") + ":102: column 'day' is text of over 100 distinct values (an id, a name, free text?), "
                               "too many to one-hot encode: --drop day leaves it out" + advice);
  testing::WriteFile(dir.Sub("few.csv"), table.substr(0, table.find("2021-02-13")));  // 40 days: one-hot encoded
  // The note on a one-hot encoded column.
  const auto note_on = [](const std::vector<std::string>& notes, const std::string& column) {
    for (const std::string& n : notes) {
      if (n.rfind("column '" + column + "' is text", 0) == 0) return n;
    }
    return std::string("(no note on column '" + column + "')");
  };
  auto few = OpenCsvSource(dir.Sub("few.csv"), CsvOptions());
  ASSERT_TRUE(few.ok()) << few.status().ToString();
  const std::string noted = note_on(few->info.notes, "day");
  ASSERT_GT(noted.size(), advice.size());
  EXPECT_EQ(noted.substr(noted.size() - advice.size()), advice);
  for (const char* date : {"04/03/2021", "04.03.2021", "2021/03/04", "2021-03-04T10:30"}) {
    testing::WriteFile(dir.Sub("one.csv"), std::string("when,x,label\n") + date + ",1,0\n" + date + ",2,1\n");
    auto one = OpenCsvSource(dir.Sub("one.csv"), CsvOptions());
    ASSERT_TRUE(one.ok()) << date;
    EXPECT_NE(note_on(one->info.notes, "when").find("its values are dates"), std::string::npos) << date;
  }
  testing::WriteFile(dir.Sub("words.csv"), "color,x,label\nred,1,0\nblue,2,1\n");
  EXPECT_EQ(note_on(OpenCsvSource(dir.Sub("words.csv"), CsvOptions())->info.notes, "color").find("dates"),
            std::string::npos);
}

TEST(CsvColumns, AnIdColumnIsRefusedSayingHowToDropItAndDropIsRecorded) {
  TempDir dir;
  std::string table = "id,name,age,label\n";
  for (int i = 0; i < 150; ++i) table += std::to_string(i) + ",person " + std::to_string(i) + "," + std::to_string(20 + i % 50) + "," + std::to_string(i % 2) + "\n";
  testing::WriteFile(dir.Sub("t.csv"), table);
  auto refused = OpenCsvSource(dir.Sub("t.csv"), CsvOptions());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            dir.Sub("t.csv") + ":102: column 'name' is text of over 100 distinct values (an id, a name, free text?), "
                               "too many to one-hot encode: --drop name leaves it out");
  CsvOptions o;
  o.drop = {"name", "id"};
  auto source = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"age"}));
  EXPECT_EQ(source->info.options.at("drop"), "id,name");  // in order: the same build however given
  EXPECT_EQ(FeaturesOf(*source->splits[0], 7), "27");
  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"nmae"}, "--drop nmae: no such column in " + dir.Sub("t.csv") + " (its columns: 'id', 'name', 'age', 'label')"},
      {{"label"}, "--drop label: is the label column"},
      {{"id", "name", "age"}, dir.Sub("t.csv") + ": no feature columns besides the label"}};
  for (const auto& [drop, message] : bad) {
    o.drop = drop;
    EXPECT_EQ(OpenCsvSource(dir.Sub("t.csv"), o).status().message(), message);
  }
  // The names reach the manifest, and a reader; the id column kept is noted as one.
  o.drop = {"name"};
  auto built = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_TRUE(built.ok());
  const std::string id_note = "column 'id' is named like an id and its values are distinct integers: a row id, from "
                              "which a model learns nothing but noise; kept as a feature (--drop id leaves it out)";
  EXPECT_NE(std::find(built->info.notes.begin(), built->info.notes.end(), id_note), built->info.notes.end());
  BuildOptions b;
  b.db_path = dir.Sub("db");
  ASSERT_TRUE(BuildDb(built.value(), b).ok());
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(db.value()->manifest().element_names.at("features"), (std::vector<std::string>{"id", "age"}));
}

// Kaggle's row ids (Id, PassengerId, customer_id, CustomerID) among the features are noted, by name and values:
// a column of repeated integers, or one whose name only ends in the letters (Paid, Valid), is not.
TEST(CsvColumns, AColumnNamedLikeAnIdOfDistinctIntegersIsNoted) {
  TempDir dir;
  std::string table = "PassengerId,customer_id,CustomerID,ID,Paid,Valid,GroupId,label\n";
  for (int i = 0; i < 40; ++i) {
    const std::string k = std::to_string(100 + i);
    table += k + "," + k + "," + k + "," + k + "," + k + "," + k + "," + std::to_string(i % 4) + "," +
             std::to_string(i % 2) + "\n";
  }
  testing::WriteFile(dir.Sub("t.csv"), table);
  auto source = OpenCsvSource(dir.Sub("t.csv"), CsvOptions());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<std::string> noted;
  for (const std::string& note : source->info.notes) {
    if (note.find("is named like an id") != std::string::npos) noted.push_back(note.substr(8, note.find('\'', 8) - 8));
  }
  EXPECT_EQ(noted, (std::vector<std::string>{"PassengerId", "customer_id", "CustomerID", "ID"}));
}

// A table without a header (UCI's iris.data): refused saying so, and read
// with --no-header, its first row data and its columns named 1..N.
TEST(CsvColumns, ATableWithoutAHeaderIsNamedAndReadWithNoHeader) {
  TempDir dir;
  testing::WriteFile(dir.Sub("iris.data"), "5.1,3.5,Iris-setosa\n4.9,3.0,Iris-setosa\n7.0,3.2,Iris-versicolor\n");
  EXPECT_EQ(OpenCsvSource(dir.Sub("iris.data"), CsvOptions()).status().message(),
            dir.Sub("iris.data") + ": give --label COLUMN: no column is named label, target, class or y (the header's "
                                   "columns: '5.1', '3.5', 'Iris-setosa'); its first row holds numbers ('5.1', '3.5'): "
                                   "a table without a header? --no-header reads it so, its columns named 1..3 (--label "
                                   "3 for the last)");
  CsvOptions o;
  o.header = false;
  o.label = "3";
  auto source = OpenCsvSource(dir.Sub("iris.data"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"Iris-setosa", "Iris-versicolor"}));
  ASSERT_EQ(source->splits[0]->size(), 3u);
  EXPECT_EQ(FeaturesOf(*source->splits[0], 0), "5 3");  // the first row is data
  EXPECT_EQ(source->splits[0]->ItemName(0), dir.Sub("iris.data") + ":1");
  EXPECT_EQ(FeaturesOf(*source->splits[0], 2), "7 3");
  o.label = "4";
  EXPECT_EQ(OpenCsvSource(dir.Sub("iris.data"), o).status().message(),
            dir.Sub("iris.data") + ": no column '4' for --label (its columns (--no-header): '1', '2', '3')");
}

// A held-out table read --like the db a model was trained on: its columns in
// that db's order whatever its header's, a text column's categories that
// db's (a value it never had a missing value, noted; a category the table
// lacks still its place), its labels that db's classes, a column the db has
// no feature of left out; a table lacking one of the db's columns is named.
TEST(CsvColumns, ATableReadLikeADbTakesItsColumnsCategoriesAndClasses) {
  TempDir dir;
  CsvOptions o;
  o.like.path = "tr.db";
  o.like.named = "--like tr.db";
  o.like.feature_names = {"n", "color=blue", "color=green", "color=red"};
  o.like.class_names = {"cat", "dog", "fox"};
  testing::WriteFile(dir.Sub("ho.csv"), "id,color,y,n\n1,red,fox,5\n2,pink,cat,6\n3,green,dog,7\n4,red,wolf,8\n");
  o.label = "y";
  auto source = OpenCsvSource(dir.Sub("ho.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), o.like.feature_names);
  EXPECT_EQ(source->info.class_names, o.like.class_names);
  const SplitSource& rows = *source->splits[0];
  EXPECT_EQ(FeaturesOf(rows, 0), "5 0 0 1");
  EXPECT_EQ(FeaturesOf(rows, 1), "column 'color': 'pink' is none of --like tr.db's categories (--missing nan or "
                                 "zero keeps the row)");
  EXPECT_EQ(FeaturesOf(rows, 2), "7 0 1 0");
  EXPECT_EQ(FeaturesOf(rows, 3), "column 'y': label 'wolf' is missing or not a class");
  Sample s;
  ASSERT_TRUE(rows.Produce(2, &s).ok());
  int64_t label = -1;
  std::memcpy(&label, s.fields[1].data(), sizeof(label));
  EXPECT_EQ(label, 1);  // dog, as tr.db numbers it (the table's own classes would make it 0)
  std::string notes;
  for (const std::string& note : source->info.notes) notes += note + "\n";
  EXPECT_NE(notes.find("column(s) none of --like tr.db's features, left out: 'id'"), std::string::npos) << notes;
  EXPECT_NE(notes.find("column 'color' holds 1 value(s) that are none of --like tr.db's categories ('pink' in 1 "
                       "row(s))"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("label column 'y' holds 1 value(s) that are none of --like tr.db's classes ('wolf')"),
            std::string::npos)
      << notes;

  o.missing = MissingPolicy::kNaN;
  source = OpenCsvSource(dir.Sub("ho.csv"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(FeaturesOf(*source->splits[0], 1), "6 nan nan nan");

  testing::WriteFile(dir.Sub("short.csv"), "color,y\nred,fox\n");
  source = OpenCsvSource(dir.Sub("short.csv"), o);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("short.csv: lacks the column(s) of --like tr.db's feature(s) 'n' (its "
                                           "columns: "),
            std::string::npos)
      << source.status().message();
}

}  // namespace
}  // namespace granary
