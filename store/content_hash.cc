#include "store/content_hash.h"

#define XXH_STATIC_LINKING_ONLY  // for XXH64_state_t by value
#include <xxhash.h>

#include <cstdlib>

#include "store/format.h"

namespace granary {
namespace {

void HashU64(XXH64_state_t* state, uint64_t v) {
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xFF);
  XXH64_update(state, le, sizeof(le));
}

uint64_t ParseHash(const std::string& s) {
  if (s.size() != 22 || s.compare(0, 6, "xxh64:") != 0) return 0;
  return std::strtoull(s.c_str() + 6, nullptr, 16);
}

}  // namespace

struct SplitHasher::Impl {
  XXH64_state_t state;
};

SplitHasher::SplitHasher() : impl_(new Impl) { XXH64_reset(&impl_->state, format::kChecksumSeed); }
SplitHasher::~SplitHasher() = default;
void SplitHasher::Add(uint64_t payload_hash) { HashU64(&impl_->state, payload_hash); }
std::string SplitHasher::Finish() const { return FormatHash(XXH64_digest(&impl_->state)); }

std::string DatasetContentHash(const std::vector<SplitInfo>& splits) {
  XXH64_state_t state;
  XXH64_reset(&state, format::kChecksumSeed);
  for (const SplitInfo& s : splits) {
    XXH64_update(&state, s.name.data(), s.name.size());
    const char zero = 0;
    XXH64_update(&state, &zero, 1);
    HashU64(&state, ParseHash(s.content_hash));
  }
  return FormatHash(XXH64_digest(&state));
}

}  // namespace granary
