// Names in a message: a list shortened to its first few.
#pragma once

#include <string>
#include <vector>

namespace granary {

// "a, b, c" (each with `suffix`), the first 8 of `names` and how many in all
// ("a, ..., h, ... (12 in all)"), for a message.
std::string NamesText(const std::vector<std::string>& names, const char* suffix = "");

}  // namespace granary
