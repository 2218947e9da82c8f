// VerifyDb: reads and checks every record of a db and its content hashes.
// Each shard is walked in a child process, so LMDB tripping over damaged
// pages (it trusts them) is reported as structural corruption of that shard
// instead of crashing the caller. Call from a single-threaded context (forks).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

struct VerifyReport {
  uint64_t samples_expected = 0;
  uint64_t samples_ok = 0;
  // One line per problem, naming shard and key where there is one.
  std::vector<std::string> problems;
  std::string content_hash;  // recomputed over the records that decoded
  bool ok() const { return problems.empty(); }
};

// Problems in the db are in the report; a non-OK status means verification
// itself could not run (e.g. fork failed). `on_shard(path, records)` is called
// before each shard is walked (for progress), if set.
StatusOr<VerifyReport> VerifyDb(const std::string& path,
                                const std::function<void(const std::string&, uint64_t)>& on_shard = nullptr);

}  // namespace granary
