// What `prep info` and `prep cat` show of a db: plain text for people, JSON
// for scripts. Read-only; safe to call from any thread with its own DbReader.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "store/db.h"

namespace granary {

// Schema, splits, counts, sizes, compression ratio and build options.
std::string DescribeDb(const DbReader& db);
std::string DescribeDbJson(const DbReader& db);

struct CatOptions {
  std::string split = "train";
  uint64_t index = 0;
  size_t max_values = 32;  // per field in text output; 0: all
  std::string png_path;    // if set, write the first image-like field there
};

// Text (or JSON) describing one record's fields, reading it through a checked
// SplitReader. Errors name the split and index.
StatusOr<std::string> DescribeRecord(const DbReader& db, const CatOptions& options, bool json);

}  // namespace granary
