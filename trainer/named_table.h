// Lookup in a constant table of entries that each have a `name` (the model
// registry, the gradient-sync methods, the optimizers, the learning-rate
// schedules): find by name, list the names.
#pragma once

#include <cstddef>
#include <string>

namespace granary {

template <typename Entry, size_t N>
const Entry* FindByName(const Entry (&table)[N], const std::string& name) {
  for (const Entry& e : table) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

// "a, b, c" in table order, for --help and errors.
template <typename Entry, size_t N>
std::string JoinNames(const Entry (&table)[N]) {
  std::string names;
  for (const Entry& e : table) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

}  // namespace granary
