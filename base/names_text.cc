#include "base/names_text.h"

namespace granary {

std::string NamesText(const std::vector<std::string>& names, const char* suffix) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 8; ++i) text += (i > 0 ? ", " : "") + names[i] + suffix;
  if (names.size() > 8) text += ", ... (" + std::to_string(names.size()) + " in all)";
  return text;
}

}  // namespace granary
