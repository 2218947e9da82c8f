// What granary's mains tell a user about a command line CLI11 refused:
// the flags among its unexpected arguments that were likely meant as
// another (base/cli.h's UnknownFlagAdvice). Header-only: it needs CLI11,
// which the mains link and the libraries do not.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "base/cli.h"

namespace granary {

// "; --batch_size: did you mean --batch-size?" for the unexpected flags of
// the parse of `app` (and its subcommands) that just failed; "" if none.
inline std::string ParseErrorAdvice(const CLI::App& app, const std::map<std::string, std::string>& aliases = {}) {
  std::vector<std::string> known;
  std::vector<const CLI::App*> apps = {&app};
  for (size_t i = 0; i < apps.size(); ++i) {
    for (const CLI::Option* option : apps[i]->get_options()) {
      for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
    }
    for (const CLI::App* sub : apps[i]->get_subcommands([](const CLI::App*) { return true; })) apps.push_back(sub);
  }
  return UnknownFlagAdvice(app.remaining(true), known, aliases);
}

}  // namespace granary
