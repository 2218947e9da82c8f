// The manifest's statistics, element names, class counts and field layouts: written and
// read back, and a lying one refused naming the member.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "store/manifest.h"

namespace granary {
namespace {

Manifest WithStatistics() {
  Manifest m;
  m.format_version = 1;
  m.builder = "test";
  m.codec = "zstd";
  m.schema.fields = {{"features", DType::kFloat32, {3}, ""}, {"label", DType::kInt64, {}, ""}};
  m.label_field = "label";
  m.num_classes = 2;
  SplitInfo split;
  split.name = "train";
  split.count = 4;
  split.shards = {{"train/shard-00000.mdb", 0, 4, 100}};
  m.splits = {split};
  FieldStatistics& s = m.statistics["train"]["features"];
  s.samples = 4;
  s.missing = {0, 1, 4};
  s.mean = {1.5, -2, std::nan("")};
  s.stddev = {0.5, 0, std::nan("")};
  s.min = {1, -2, std::nan("")};
  s.max = {2, -2, std::nan("")};
  return m;
}

TEST(Manifest, StatisticsReadBackWithNullWhereNoValueIsPresent) {
  const std::string text = ManifestToJson(WithStatistics());
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_TRUE(j["statistics"]["train"]["features"]["mean"][2].is_null());
  EXPECT_EQ(j["statistics"]["train"]["features"]["std"][0], 0.5);
  auto m = ParseManifest(text, "manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const FieldStatistics& s = m->statistics.at("train").at("features");
  EXPECT_EQ(s.missing, (std::vector<uint64_t>{0, 1, 4}));
  EXPECT_EQ(s.mean[0], 1.5);
  EXPECT_TRUE(std::isnan(s.max[2]));
  // A manifest without statistics (before 2026-12, or an image db) has none.
  nlohmann::json old = j;
  old.erase("statistics");
  auto plain = ParseManifest(old.dump(), "manifest.json");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->statistics.empty());
}

TEST(Manifest, LyingStatisticsAreCorruptionNamingTheMember) {
  const nlohmann::json good = nlohmann::json::parse(ManifestToJson(WithStatistics()));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> lies = {
      {[](nlohmann::json& s) { s["train"]["features"]["std"][0] = -1; }, "statistics.train.features: std[0]"},
      {[](nlohmann::json& s) { s["train"]["features"]["mean"][2] = 0; }, "statistics.train.features: mean[2]"},
      {[](nlohmann::json& s) { s["train"]["features"]["mean"][1] = nullptr; }, "statistics.train.features: mean[1]"},
      {[](nlohmann::json& s) { s["train"]["features"]["min"] = {1, 2}; }, "statistics.train.features: min: not an array of 3"},
      {[](nlohmann::json& s) { s["train"]["features"]["missing"] = {0, 1, 5}; }, "statistics.train.features: mean[2]"},
      {[](nlohmann::json& s) { s["train"]["features"]["missing"] = {0, -1, 4}; }, "statistics.train.features"},
      {[](nlohmann::json& s) { s["train"]["features"]["samples"] = 5; }, "samples 5, the split has 4"},
      {[](nlohmann::json& s) { s["train"]["features"]["max"][0] = std::numeric_limits<double>::infinity(); }, "statistics.train.features"},
      {[](nlohmann::json& s) { s["train"]["label"] = s["train"]["features"]; }, "statistics.train.label: not a field"},
      {[](nlohmann::json& s) { s["test"] = s["train"]; }, "statistics.test: no such split"},
      {[](nlohmann::json& s) { s = nlohmann::json::array(); }, "statistics: not an object"},
  };
  for (const auto& [lie, expected] : lies) {
    nlohmann::json j = good;
    lie(j["statistics"]);
    const Status s = ParseManifest(j.dump(), "manifest.json").status();
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << expected << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
}

// Element names (a CSV table's columns) read back; a list that does not
// fit its field is refused.
TEST(Manifest, ElementNamesReadBackAndMustFitTheirField) {
  Manifest with = WithStatistics();
  with.element_names["features"] = {"a", "b", "color=red"};
  const nlohmann::json good = nlohmann::json::parse(ManifestToJson(with));
  auto m = ParseManifest(good.dump(), "manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->element_names.at("features"), with.element_names.at("features"));
  EXPECT_FALSE(nlohmann::json::parse(ManifestToJson(WithStatistics())).contains("element_names"));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> lies = {
      {[](nlohmann::json& n) { n["features"] = {"a", "b"}; }, "element_names.features: 2 names for 3 elements"},
      {[](nlohmann::json& n) { n["nope"] = {"a"}; }, "element_names.nope: not a field of fixed shape"},
      {[](nlohmann::json& n) { n["features"] = {"a", 1, "c"}; }, "element_names"},
      {[](nlohmann::json& n) { n = "a"; }, "element_names: not an object"},
  };
  for (const auto& [lie, expected] : lies) {
    nlohmann::json j = good;
    lie(j["element_names"]);
    const Status s = ParseManifest(j.dump(), "manifest.json").status();
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << expected << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
}

// Class counts read back; a list that does not give each class's samples of
// the split (its length, its sum, a count past it) is refused.
TEST(Manifest, ClassCountsReadBackAndMustSumToTheSplit) {
  Manifest with = WithStatistics();
  with.class_counts["train"] = {3, 1};
  const nlohmann::json good = nlohmann::json::parse(ManifestToJson(with));
  auto m = ParseManifest(good.dump(), "manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->class_counts.at("train"), (std::vector<uint64_t>{3, 1}));
  EXPECT_FALSE(nlohmann::json::parse(ManifestToJson(WithStatistics())).contains("class_counts"));
  const std::string unfit = "class_counts.train: not one count for each of the db's 2 classes summing to the "
                            "split's 4 samples";
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> lies = {
      {[](nlohmann::json& c) { c["train"] = {3, 2}; }, unfit},
      {[](nlohmann::json& c) { c["train"] = {4}; }, unfit},
      {[](nlohmann::json& c) { c["train"] = {3, 1, 0}; }, unfit},
      {[](nlohmann::json& c) { c["train"] = {UINT64_MAX, 5}; }, unfit},  // sums to 4 past 2^64
      {[](nlohmann::json& c) { c["train"] = {3, -1}; }, "class_counts"},
      {[](nlohmann::json& c) { c["test"] = {3, 1}; }, "class_counts.test: no such split"},
      {[](nlohmann::json& c) { c = "a"; }, "class_counts: not an object"},
  };
  for (const auto& [lie, expected] : lies) {
    nlohmann::json j = good;
    lie(j["class_counts"]);
    const Status s = ParseManifest(j.dump(), "manifest.json").status();
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << expected << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
}

TEST(Manifest, LayoutsMustFitTheirField) {
  Manifest m = WithStatistics();
  m.schema.fields.push_back({"caption", DType::kUInt8, {kVariableDim}, kTextLayout});
  m.schema.fields.push_back({"image", DType::kUInt8, {28, 28, 1}, "HWC"});
  const nlohmann::json good = nlohmann::json::parse(ManifestToJson(m));
  auto parsed = ParseManifest(good.dump(), "manifest.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->schema.fields[2].IsText());
  EXPECT_EQ(parsed->schema.fields[3].layout, "HWC");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> lies = {
      {[](nlohmann::json& f) { f[0]["layout"] = "utf-8"; }, "layout 'utf-8' (text) is for uint8 of shape [-1], not "
                                                             "float32 [3]"},
      {[](nlohmann::json& f) { f[2]["shape"] = {4}; }, "layout 'utf-8' (text) is for uint8 of shape [-1]"},
      {[](nlohmann::json& f) { f[3]["layout"] = "utf-8"; }, "not uint8 [28, 28, 1]"},
      {[](nlohmann::json& f) { f[2]["layout"] = "latin-1"; }, "layout 'latin-1' needs a 3-dim shape"},
      {[](nlohmann::json& f) { f[2]["layout"] = "CHW"; }, "layout 'CHW' needs a 3-dim shape"},
  };
  for (const auto& [lie, expected] : lies) {
    nlohmann::json j = good;
    lie(j["schema"]["fields"]);
    const Status s = ParseManifest(j.dump(), "manifest.json").status();
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << expected << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace granary
