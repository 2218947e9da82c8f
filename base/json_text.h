// Names are bytes (Linux file names, CSV headers); JSON holds only UTF-8.
// Every JSON document granary writes (manifest, journal, --json output) goes
// through DumpJson, which stores any byte string losslessly (docs/FORMAT.md,
// "Names"), and every one it reads through ParseJson, which restores it.
// Printable makes a name safe for a one-line message on a terminal.
// Stateless and thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace granary {

// Valid UTF-8 stays as it is. Every other byte B (0x80..0xFF) becomes the
// code point U+10FF00 + B (in Unicode's private use plane 16), written as
// UTF-8; so does each byte of a code point U+10FF80..U+10FFFF already in the
// name, which keeps the mapping reversible.
std::string EncodeName(std::string_view bytes);
// The inverse of EncodeName for any valid UTF-8 text.
std::string DecodeName(std::string_view text);

// `j` as JSON text with every string (member names too) EncodeName'd: never
// throws on a name that is not UTF-8. indent < 0: one line.
std::string DumpJson(const nlohmann::json& j, int indent = -1);
// Deepest nesting of arrays and objects ParseJson accepts. granary's own
// documents nest less than 8 deep.
inline constexpr int kMaxJsonDepth = 64;
// Parses JSON text and DecodeName's every string; a discarded value (see
// is_discarded()) if the text is not JSON or nests deeper than kMaxJsonDepth.
nlohmann::json ParseJson(std::string_view text);
// Why ParseJson discarded `text`, for a message: "not valid JSON", or that
// it nests too deep.
std::string WhyNotJson(std::string_view text);
// The deepest nesting of arrays and objects in `text` (strings skipped),
// counted until it passes `limit`.
int JsonDepth(std::string_view text, int limit);

// True if `v` is a JSON integer that T holds. Check before get<T>():
// nlohmann casts a float (1e105) or an integer out of T's range, wrapping or
// worse (a float out of range is undefined behaviour; found by fuzzing).
template <typename T>
bool JsonIntegerFits(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T>);
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if constexpr (std::is_unsigned_v<T>) {
    return false;  // a negative integer
  } else {
    const int64_t i = v.get<int64_t>();
    return i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           i <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// The first place where `was` and `now` differ, for a message: its path
// and both values, e.g. "options.size: \"64\" -> \"32\"" ("" if equal).
std::string JsonDifference(const nlohmann::json& was, const nlohmann::json& now);

// True if `bytes` is valid UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF: what Python's bytes.decode("utf-8") accepts).
bool IsUtf8(std::string_view bytes);

// `bytes` for a terminal: control characters, backslashes and bytes that are
// not UTF-8 written as \xNN (a newline as \n), so a message stays one line.
std::string Printable(std::string_view bytes);

}  // namespace granary
