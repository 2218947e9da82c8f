#include "loader/sampler.h"

#include <numeric>

namespace granary {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): small, fast, and easy to reimplement.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) by rejection, so the order has no modulo bias.
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % bound;
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<uint64_t> EpochPermutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  // Mixing the epoch through one SplitMix64 step keeps (seed, epoch) pairs apart.
  SplitMix64 rng(seed ^ SplitMix64(epoch).Next());
  for (uint64_t i = n; i > 1; --i) {
    uint64_t j = rng.Below(i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

StatusOr<Sampler> Sampler::Create(uint64_t dataset_size, const SamplerOptions& options) {
  if (options.world < 1) return Status::InvalidArgument("world size must be >= 1, got " + std::to_string(options.world));
  if (options.rank < 0 || options.rank >= options.world) {
    return Status::InvalidArgument("rank " + std::to_string(options.rank) + " is outside [0, " +
                                   std::to_string(options.world) + ")");
  }
  if (dataset_size == 0) return Status::InvalidArgument("the split is empty");
  const uint64_t world = static_cast<uint64_t>(options.world);
  const uint64_t per_rank = options.drop_last ? dataset_size / world : (dataset_size + world - 1) / world;
  if (per_rank == 0) {
    return Status::InvalidArgument("--drop-last with " + std::to_string(dataset_size) + " samples leaves none for " +
                                   std::to_string(world) + " ranks");
  }
  return Sampler(dataset_size, options, per_rank);
}

std::vector<uint64_t> Sampler::EpochIndices(uint64_t epoch) const {
  std::vector<uint64_t> order;
  if (options_.shuffle) {
    order = EpochPermutation(n_, options_.seed, epoch);
  } else {
    order.resize(n_);
    std::iota(order.begin(), order.end(), uint64_t{0});
  }
  std::vector<uint64_t> mine(per_rank_);
  const uint64_t world = static_cast<uint64_t>(options_.world);
  for (uint64_t k = 0; k < per_rank_; ++k) {
    // Positions past n wrap to the start of the order: that is the padding.
    mine[k] = order[(static_cast<uint64_t>(options_.rank) + k * world) % n_];
  }
  return mine;
}

}  // namespace granary
