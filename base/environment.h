// A process's environment variables, read once (Environment::OfProcess, in
// main) and passed down to what reads them, so that no component calls
// getenv on its own and a test gives a component the environment it wants
// without setenv.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace granary {

class Environment {
 public:
  Environment() = default;  // empty
  explicit Environment(std::map<std::string, std::string> variables) : variables_(std::move(variables)) {}
  // This process's environment now.
  static Environment OfProcess();

  bool Has(const std::string& name) const { return variables_.count(name) > 0; }
  // The value of `name`; `otherwise` if it is not set.
  std::string Get(const std::string& name, const std::string& otherwise = "") const;
  // `name` as a non-negative decimal int; -1 if it is not set or not one.
  int Number(const std::string& name) const;
  // Every variable as NAME=value, in name order (a child's environment).
  std::vector<std::string> Entries() const;

  // A copy with `name` set to `value`.
  Environment With(const std::string& name, const std::string& value) const;

 private:
  std::map<std::string, std::string> variables_;
};

}  // namespace granary
