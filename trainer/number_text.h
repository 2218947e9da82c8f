// A flag's floating-point value as the user would write it in a message:
// "0.25", "1e-05", "1e+06" (printf's %g). One home for every message of the
// trainer that quotes a number back.
#pragma once

#include <cstdio>
#include <string>

namespace granary {

inline std::string NumberText(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

// A measured figure with `decimals` digits after the point: "0.8612", "41.2".
inline std::string FixedText(double v, int decimals) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.*f", decimals, v);
  return text;
}

}  // namespace granary
