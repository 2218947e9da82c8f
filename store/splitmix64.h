// SplitMix64 (Steele, Lea, Flood 2014), the one generator behind every
// random choice granary makes reproducibly: the epoch order (docs/FORMAT.md,
// "Epoch order"), augmentation draws and the seed of each training step's
// dropout. Small, fast and easy to reimplement in another language.
// Header-only; a SplitMix64 object is not thread-safe, the functions are.
#pragma once

#include <cstdint>

namespace granary {

// The generator's increment: 2^64 divided by the golden ratio, odd.
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ULL;

// SplitMix64's finaliser: a bijection of 64 bits that mixes every input bit
// into every output bit.
inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return SplitMix64Mix(state_ += kSplitMix64Gamma); }

 private:
  uint64_t state_;
};

}  // namespace granary
