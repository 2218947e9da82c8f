// A CSV label column read as a number to predict (prep build --regression):
// float32 field 'target', the column's name kept, no classes; a value that
// is no number rejects its row, saying why.
#include <gtest/gtest.h>

#include <cstring>

#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

// Row `i`'s target.
float TargetOf(const SplitSource& split, uint64_t i) {
  Sample row;
  Status produced = split.Produce(i, &row);
  EXPECT_TRUE(produced.ok()) << produced.ToString();
  float value = 0;
  if (row.fields.size() == 2 && row.fields[1].size() == sizeof(value)) {
    std::memcpy(&value, row.fields[1].data(), sizeof(value));
  }
  return value;
}

TEST(Csv, RegressionTargetsAreFloat32ValuesNotClasses) {
  testing::TempDir dir;
  std::string prices = "rooms,price\n";
  for (int i = 0; i < 120; ++i) {
    prices += std::to_string(i % 5) + "," + std::to_string(1000 + i) + (i == 7 ? ".5\n" : "\n");
  }
  testing::WriteFile(dir.Sub("prices.csv"), prices);
  CsvOptions o;
  o.label = "price";
  o.regression = true;
  auto values = OpenCsvSource(dir.Sub("prices.csv"), o);
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(values->info.label_field, "target");
  EXPECT_EQ(values->info.num_classes, 0);
  EXPECT_TRUE(values->info.class_names.empty());
  EXPECT_EQ(values->info.element_names["target"], std::vector<std::string>{"price"});
  ASSERT_EQ(values->info.schema.fields[1].dtype, DType::kFloat32);
  EXPECT_EQ(values->info.schema.fields[1].shape, Shape{});
  EXPECT_EQ(TargetOf(*values->splits[0], 7), 1007.5f);
  EXPECT_EQ(TargetOf(*values->splits[0], 119), 1119.0f);

  testing::WriteFile(dir.Sub("bad.csv"), "rooms,price\n1,inf\n2,3.5\n3,1.5e39\n4,\n5,12,5\n");
  auto bad = OpenCsvSource(dir.Sub("bad.csv"), o);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  Sample row;
  EXPECT_EQ(bad->splits[0]->Produce(0, &row).message(),
            "column 'price': 'inf' is not a number float32 can hold (a value to predict must be finite)");
  EXPECT_EQ(TargetOf(*bad->splits[0], 1), 3.5f);
  EXPECT_EQ(bad->splits[0]->Produce(2, &row).message(), "column 'price': '1.5e39' is not a number float32 can hold");
  EXPECT_EQ(bad->splits[0]->Produce(3, &row).message(), "column 'price': missing value");
  EXPECT_EQ(bad->splits[0]->Produce(4, &row).message(), "3 fields, the header has 2");
}

}  // namespace
}  // namespace granary
