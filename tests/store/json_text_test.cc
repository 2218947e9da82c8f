#include "store/json_text.h"

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

TEST(JsonText, PrintableKeepsAMessageOnOneLine) {
  EXPECT_EQ(Printable("dogs/a.jpg"), "dogs/a.jpg");
  EXPECT_EQ(Printable("two\nlines"), "two\\nlines");
  EXPECT_EQ(Printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(Printable("caf\xe9 caf\xc3\xa9"), "caf\\xe9 caf\xc3\xa9");
  EXPECT_EQ(Printable("back\\slash"), "back\\x5cslash");
}

}  // namespace
}  // namespace granary
