#include "base/json_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace granary {
namespace {

constexpr uint32_t kEscapeBase = 0x10FF00;  // byte B <-> U+10FF00 + B, B >= 0x80

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 if the
// byte there does not start one; *cp gets its code point.
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t n;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, min = 0x80, *cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, min = 0x800, *cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, min = 0x10000, *cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (byte(i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;  // overlong, too big, surrogate
  return n;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsEscape(uint32_t cp) { return cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF; }

// Applies `f` to every string in `j`, member names included.
template <typename F>
nlohmann::json MapStrings(const nlohmann::json& j, F f) {
  if (j.is_string()) return f(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(MapStrings(v, f));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, value] : j.items()) out[f(key)] = MapStrings(value, f);
    return out;
  }
  return j;
}

// JsonDifference below `path` ("" at the top), where `was` != `now`.
std::string DifferenceAt(const nlohmann::json& was, const nlohmann::json& now, const std::string& path) {
  const auto member = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (was.is_object() && now.is_object()) {
    for (const auto& [key, value] : was.items()) {
      if (!now.contains(key)) return member(key) + ": " + DumpJson(value) + " -> (none)";
      if (value != now[key]) return DifferenceAt(value, now[key], member(key));
    }
    for (const auto& [key, value] : now.items()) {
      if (!was.contains(key)) return member(key) + ": (none) -> " + DumpJson(value);
    }
  } else if (was.is_array() && now.is_array() && was.size() == now.size()) {
    for (size_t i = 0; i < was.size(); ++i) {
      if (was[i] != now[i]) return DifferenceAt(was[i], now[i], path + "[" + std::to_string(i) + "]");
    }
  }
  return (path.empty() ? "" : path + ": ") + DumpJson(was) + " -> " + DumpJson(now);
}

}  // namespace

std::string EncodeName(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(bytes, i, &cp);
    if (n > 0 && !IsEscape(cp)) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    // Not UTF-8, or a code point of the escape range: each byte escaped.
    for (size_t k = 0; k < (n > 0 ? n : 1); ++k) AppendUtf8(kEscapeBase + static_cast<uint8_t>(bytes[i + k]), &out);
    i += n > 0 ? n : 1;
  }
  return out;
}

std::string DecodeName(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(text, i, &cp);
    if (n == 0) {  // not UTF-8: not ours to decode, kept as it is
      out.push_back(text[i++]);
      continue;
    }
    if (IsEscape(cp)) {
      out.push_back(static_cast<char>(cp - kEscapeBase));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return MapStrings(j, [](const std::string& s) { return EncodeName(s); }).dump(indent);
}

int JsonDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string JsonDifference(const nlohmann::json& was, const nlohmann::json& now) {
  return was == now ? "" : DifferenceAt(was, now, "");
}

std::string WhyNotJson(std::string_view text) {
  if (JsonDepth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
  }
  return "not valid JSON";
}

nlohmann::json ParseJson(std::string_view text) {
  // Bounded first: parsing and freeing recurse once per level (a 60 KB
  // document 30,000 deep overflowed the stack).
  if (JsonDepth(text, kMaxJsonDepth) > kMaxJsonDepth) return nlohmann::json(nlohmann::json::value_t::discarded);
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return j;
  return MapStrings(j, [](const std::string& s) { return DecodeName(s); });
}

bool IsUtf8(std::string_view bytes) {
  uint32_t cp;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8Sequence(bytes, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string Printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(bytes, i, &cp);
    if (n > 1 || (n == 1 && cp >= 0x20 && cp != 0x7F && cp != '\\')) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    char buf[8];
    if (bytes[i] == '\n') {
      out += "\\n";
    } else {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(static_cast<uint8_t>(bytes[i])));
      out += buf;
    }
    ++i;
  }
  return out;
}

}  // namespace granary
