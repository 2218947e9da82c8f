// prep build's command line: the arguments and flags it parses into, each
// bounded before any work starts (prep_main.cc runs what they ask).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "preprocess/build.h"
#include "preprocess/source.h"

namespace granary {

// CLI11 reads "-1" into an unsigned option as 2^64 - 1: refuse it first.
inline const CLI::Validator kNonNegative(
    [](std::string& value) { return value.find('-') == std::string::npos ? std::string() : "must be >= 0"; },
    "NONNEGATIVE");

struct BuildArgs {
  RawOptions raw;
  std::string db;
  std::string class_names;
  std::string on_error = "skip";
  std::string dictionary = "auto";
  double max_rejects = 0.01;
  bool json = false;
  bool no_progress = false;
  bool update = false;
  BuildOptions options;
};

// The arguments (RAW, DB) and the flags of how RAW is read.
void AddInputFlags(CLI::App* build, BuildArgs* args);

// The flags of how the build runs and writes DB (with --limit and
// --class-names, what of RAW it takes); `cores` bounds --threads.
void AddOutputFlags(CLI::App* build, int cores, BuildArgs* args);

}  // namespace granary
