#include "base/environment.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace granary {

Environment Environment::OfProcess() {
  std::map<std::string, std::string> variables;
  for (char** v = environ; *v != nullptr; ++v) {
    const char* equals = std::strchr(*v, '=');
    if (equals == nullptr) continue;  // not NAME=value: nothing to read
    // The first of a name wins, as getenv's does.
    variables.emplace(std::string(*v, static_cast<size_t>(equals - *v)), equals + 1);
  }
  return Environment(std::move(variables));
}

std::string Environment::Get(const std::string& name, const std::string& otherwise) const {
  const auto it = variables_.find(name);
  return it == variables_.end() ? otherwise : it->second;
}

int Environment::Number(const std::string& name) const {
  const auto it = variables_.find(name);
  if (it == variables_.end() || it->second.empty()) return -1;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(it->second.c_str(), &end, 10);
  return *end == '\0' && errno == 0 && v >= 0 && v <= INT_MAX ? static_cast<int>(v) : -1;
}

std::vector<std::string> Environment::Entries() const {
  std::vector<std::string> out;
  out.reserve(variables_.size());
  for (const auto& [name, value] : variables_) out.push_back(name + "=" + value);
  return out;
}

Environment Environment::With(const std::string& name, const std::string& value) const {
  Environment copy = *this;
  copy.variables_[name] = value;
  return copy;
}

}  // namespace granary
