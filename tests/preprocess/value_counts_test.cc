// A build's count of each label value (the manifest's class_counts), and
// what the counts of a db's splits note for a user.
#include "preprocess/value_counts.h"

#include <gtest/gtest.h>


namespace granary {
namespace {

std::string Bytes(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }
std::string Bytes(uint8_t v) { return std::string(1, static_cast<char>(v)); }

// A float scalar, an int64 label, a uint8 scalar and an int64 vector: the two integer scalars are counted.
const Schema kSchema = {{{"x", DType::kFloat32, {}, ""},
                         {"label", DType::kInt64, {}, ""},
                         {"grade", DType::kUInt8, {}, ""},
                         {"ids", DType::kInt64, {2}, ""}}};

std::vector<std::string> Sample(int64_t label, uint8_t grade) {
  return {std::string(4, '\0'), Bytes(label), Bytes(grade), std::string(16, '\0')};
}

TEST(ValueCounter, CountsScalarIntegerFieldsAcrossMergedBlocks) {
  ValueCounter whole(kSchema), first(kSchema), second(kSchema);
  for (int64_t i = 0; i < 10; ++i) {
    whole.Add(Sample(i % 3, static_cast<uint8_t>(200 + i % 2)));
    (i < 4 ? first : second).Add(Sample(i % 3, static_cast<uint8_t>(200 + i % 2)));
  }
  first.Merge(second);
  first.Merge(ValueCounter());  // a block of no samples
  const std::map<int64_t, uint64_t> labels = {{0, 4}, {1, 3}, {2, 3}};
  ASSERT_NE(first.Counts("label"), nullptr);
  EXPECT_EQ(*first.Counts("label"), labels);
  EXPECT_EQ(*whole.Counts("label"), labels);
  EXPECT_EQ(*first.Counts("grade"), (std::map<int64_t, uint64_t>{{200, 5}, {201, 5}}));
  EXPECT_EQ(first.Counts("x"), nullptr);
  EXPECT_EQ(first.Counts("ids"), nullptr);
  EXPECT_TRUE(ValueCounter(Schema{{{"x", DType::kFloat32, {3}, ""}}}).empty());

  // The journal's state and back; null (a journal of a granary before counts): none counted.
  auto back = ValueCounter::FromJson(first.ToJson(), kSchema);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back->Counts("label"), labels);
  auto unknown = ValueCounter::FromJson(nlohmann::json(), kSchema);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->Counts("label"), nullptr);
  unknown->Add(Sample(1, 1));
  EXPECT_EQ(unknown->Counts("label"), nullptr);  // partial counts would be wrong ones
  EXPECT_EQ(ValueCounter::FromJson(nlohmann::json{{"label", {{1, 2}}}}, kSchema).status().code(),
            Status::Code::kCorruption);
}

// A stored record's label, known to its source, counts as the decoded field would.
TEST(ValueCounter, ASampleCountsByItsLabelAloneWhereTheLabelIsTheOneFieldCounted) {
  ValueCounter labels(Schema{{{"image", DType::kUInt8, {2}, ""}, {"label", DType::kInt64, {}, ""}}});
  EXPECT_TRUE(labels.OnlyField(1));
  EXPECT_FALSE(labels.OnlyField(0));
  EXPECT_FALSE(labels.OnlyField(-1));
  EXPECT_FALSE(ValueCounter(kSchema).OnlyField(1));  // grade is counted too: the record must be decoded
  labels.AddToOnlyField(2);
  labels.Add({"ab", Bytes(int64_t{2})});
  EXPECT_EQ(*labels.Counts("label"), (std::map<int64_t, uint64_t>{{2, 2}}));
  ValueCounter none;
  none.AddToOnlyField(1);  // no field counted: nothing to add
  EXPECT_TRUE(none.empty());
}

TEST(ValueCounter, AFieldOfTooManyValuesIsNoLongerCounted) {
  ValueCounter ids(kSchema), more(kSchema);
  for (int64_t i = 0; i <= static_cast<int64_t>(kMaxCountedValues); ++i) ids.Add(Sample(i, 1));
  EXPECT_EQ(ids.Counts("label"), nullptr);  // an id, not a class
  ASSERT_NE(ids.Counts("grade"), nullptr);
  EXPECT_EQ(ids.Counts("grade")->at(1), kMaxCountedValues + 1);
  more.Add(Sample(7, 1));
  more.Merge(ids);
  EXPECT_EQ(more.Counts("label"), nullptr);
  auto back = ValueCounter::FromJson(ids.ToJson(), kSchema);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Counts("label"), nullptr);
}

TEST(ValueCounter, ClassCountsHoldOnlyLabelsWithinTheClasses) {
  EXPECT_EQ(ClassCountsOf({{0, 2}, {2, 5}}, 4), (std::vector<uint64_t>{2, 0, 5, 0}));
  EXPECT_TRUE(ClassCountsOf({{0, 2}, {4, 1}}, 4).empty());
  EXPECT_TRUE(ClassCountsOf({{-1, 2}}, 4).empty());
}

Manifest Counted(std::map<std::string, std::vector<uint64_t>> counts) {
  Manifest m;
  m.num_classes = static_cast<int64_t>(counts.begin()->second.size());
  m.class_names = {"ant", "bee", "cow"};
  m.class_counts = std::move(counts);
  return m;
}

TEST(ClassCountNotes, NameAnImbalancedTrainingSplitAndClassesASplitLacks) {
  const Manifest m = Counted({{"train", {30, 2, 3}}, {"val", {4, 0, 1}}, {"test", {0, 1, 9}}});
  EXPECT_EQ(ImbalanceNote(m), "split 'train' is imbalanced: class 'ant' has 30 samples, 'bee' 2 (15x): a model that "
                              "always answers 'ant' scores 85.7% accuracy on it; train reports the balanced accuracy "
                              "beside it, and --class-weights balanced weighs the loss by the classes' rarity");
  EXPECT_EQ(ClassGapNotes(m), (std::vector<std::string>{
                                  "split 'test' holds no sample of class(es) 'ant' that 'train' has: its scores say "
                                  "nothing of them",
                                  "split 'val' holds no sample of class(es) 'bee' that 'train' has: its scores say "
                                  "nothing of them"}));
  // Without a split named train, the largest is trained on; a class only another split has is named.
  const Manifest other = Counted({{"fit", {10, 10, 0}}, {"holdout", {1, 1, 1}}});
  EXPECT_EQ(ImbalanceNote(other), "");  // 10 and 10: a class without samples is not the smallest
  EXPECT_EQ(ClassGapNotes(other), (std::vector<std::string>{"split 'fit' holds no sample of class(es) 'cow' that "
                                                            "'holdout' has: no model trained on it learns them"}));
  EXPECT_EQ(ImbalanceNote(Counted({{"train", {9, 1, 5}}})), "");  // 9x: under kImbalancedRatio
  EXPECT_TRUE(ClassGapNotes(Manifest()).empty());
}

}  // namespace
}  // namespace granary
