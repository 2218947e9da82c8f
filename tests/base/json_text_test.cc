#include "base/json_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace granary {
namespace {

TEST(JsonText, Utf8NamesAreStoredAsTheyAre) {
  for (const std::string name : {"", "cats", "ünïcödé/名前.jpg", "emoji 🐈", "tab\there"}) {
    EXPECT_EQ(EncodeName(name), name);
    EXPECT_EQ(DecodeName(name), name);
  }
}

// Any byte string survives EncodeName, JSON and DecodeName, and DumpJson never
// throws (nlohmann's dump throws type_error.316 on invalid UTF-8).
TEST(JsonText, EveryByteStringRoundTripsThroughJson) {
  std::mt19937 rng(7);
  std::vector<std::string> names = {"caf\xe9", "\xff\xfe", "\xed\xa0\x80",  // an encoded surrogate
                                    "\xf4\x8f\xbf\xbf",                     // U+10FFFF, inside the escape range
                                    "ok\xc3", "\xc0\xaf"};                  // truncated; overlong
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 12, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    names.push_back(s);
  }
  for (const std::string& name : names) {
    const std::string text = DumpJson(nlohmann::json{{"name", name}, {name, 1}});
    const nlohmann::json back = ParseJson(text);
    ASSERT_FALSE(back.is_discarded()) << text;
    EXPECT_EQ(back["name"].get<std::string>(), name);
    EXPECT_TRUE(back.contains(name));
  }
  EXPECT_TRUE(ParseJson("{not json").is_discarded());
}

// A small document nested very deep overflowed the parser's stack: it is
// refused before parsing, saying why; brackets inside strings do not count.
TEST(JsonText, NestingIsBoundedBeforeParsing) {
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  EXPECT_TRUE(ParseJson(deep).is_discarded());
  EXPECT_EQ(WhyNotJson(deep), "nested deeper than 64 levels");
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_FALSE(ParseJson(at_limit).is_discarded());
  EXPECT_TRUE(ParseJson("[" + at_limit + "]").is_discarded());
  const std::string in_strings = R"({"a": "[[[[{{{{\"[[[", "b": [1]})";
  EXPECT_EQ(JsonDepth(in_strings, 64), 2);
  EXPECT_FALSE(ParseJson(in_strings).is_discarded());
  EXPECT_EQ(WhyNotJson("{not json"), "not valid JSON");
}

TEST(JsonText, JsonDifferenceNamesTheFirstMemberThatDiffers) {
  const nlohmann::json was = {{"kind", "images"}, {"options", {{"size", "64"}, {"channels", "3"}}}, {"splits", {1, 2}}};
  nlohmann::json now = was;
  EXPECT_EQ(JsonDifference(was, now), "");
  now["options"]["size"] = "32";
  EXPECT_EQ(JsonDifference(was, now), "options.size: \"64\" -> \"32\"");
  now = was;
  now["splits"][1] = 3;
  EXPECT_EQ(JsonDifference(was, now), "splits[1]: 2 -> 3");
  now = was;
  now["options"].erase("channels");
  EXPECT_EQ(JsonDifference(was, now), "options.channels: \"3\" -> (none)");
  now = was;
  now["limit"] = 10;
  EXPECT_EQ(JsonDifference(was, now), "limit: (none) -> 10");
}

TEST(JsonText, PrintableKeepsAMessageOnOneLine) {
  EXPECT_EQ(Printable("dogs/a.jpg"), "dogs/a.jpg");
  EXPECT_EQ(Printable("two\nlines"), "two\\nlines");
  EXPECT_EQ(Printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(Printable("caf\xe9 caf\xc3\xa9"), "caf\\xe9 caf\xc3\xa9");
  EXPECT_EQ(Printable("back\\slash"), "back\\x5cslash");
}

TEST(JsonText, IsUtf8AcceptsWhatPythonDecodes) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("caf\xc3\xa9 \xe7\x8c\xab \xf0\x9f\x90\x88"));  // café 猫 🐈
  EXPECT_TRUE(IsUtf8(std::string("nul\0ok", 6)));
  EXPECT_FALSE(IsUtf8("caf\xe9"));              // Latin-1
  EXPECT_FALSE(IsUtf8("\xc3"));                 // cut short
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));             // overlong '/'
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));         // a surrogate, U+D800
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));     // past U+10FFFF
}

}  // namespace
}  // namespace granary
