// Content hashes of splits and dbs (docs/FORMAT.md, "Content hashes"): they
// depend only on the records' uncompressed payloads and their order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/manifest.h"

namespace granary {

// Chains the payload hashes of a split's records, in index order.
class SplitHasher {
 public:
  SplitHasher();
  ~SplitHasher();
  SplitHasher(const SplitHasher&) = delete;
  SplitHasher& operator=(const SplitHasher&) = delete;

  void Add(uint64_t payload_hash);
  std::string Finish() const;  // "xxh64:<16 hex digits>"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The db's hash from its splits' content_hash values, in manifest order.
std::string DatasetContentHash(const std::vector<SplitInfo>& splits);

}  // namespace granary
