#include "loader/sampler.h"

#include <algorithm>
#include <numeric>

#include "store/splitmix64.h"

namespace granary {
namespace {

// Uniform in [0, bound) from `rng` by rejection, so the order has no modulo bias.
uint64_t Below(SplitMix64& rng, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = rng.Next();
  } while (x >= limit);
  return x % bound;
}

}  // namespace

std::vector<uint64_t> EpochPermutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  // Mixing the epoch through one SplitMix64 step keeps (seed, epoch) pairs apart.
  SplitMix64 rng(seed ^ SplitMix64(epoch).Next());
  for (uint64_t i = n; i > 1; --i) {
    uint64_t j = Below(rng, i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<uint64_t> BlockPermutation(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t block_samples,
                                       uint64_t block_window) {
  const uint64_t chunks = (n + block_samples - 1) / block_samples;
  std::vector<uint64_t> chunk_order(chunks);
  std::iota(chunk_order.begin(), chunk_order.end(), uint64_t{0});
  SplitMix64 rng(seed ^ SplitMix64(epoch).Next());
  for (uint64_t i = chunks; i > 1; --i) std::swap(chunk_order[i - 1], chunk_order[Below(rng, i)]);
  std::vector<uint64_t> order;
  order.reserve(n);
  for (uint64_t g = 0; g < chunks; g += block_window) {
    const size_t lo = order.size();
    for (uint64_t k = g; k < std::min(chunks, g + block_window); ++k) {
      const uint64_t c = chunk_order[k];
      for (uint64_t i = c * block_samples; i < std::min(n, (c + 1) * block_samples); ++i) order.push_back(i);
    }
    for (uint64_t i = order.size() - lo; i > 1; --i) std::swap(order[lo + i - 1], order[lo + Below(rng, i)]);
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
  if (options.mode == ShuffleMode::kBlock && (options.block_samples == 0 || options.block_window == 0)) {
    return Status::InvalidArgument("block shuffling needs a block size and window of at least 1");
  }
  if (options.drop_last && dataset_size < static_cast<uint64_t>(options.world)) {
    return Status::InvalidArgument("--drop-last with " + std::to_string(dataset_size) + " samples leaves none for " +
                                   std::to_string(options.world) + " ranks");
  }
  return Sampler(dataset_size, options);
}

uint64_t Sampler::samples_per_rank(uint64_t start) const {
  const uint64_t m = start < n_ ? n_ - start : 0;
  const uint64_t world = static_cast<uint64_t>(options_.world);
  return options_.drop_last ? m / world : (m + world - 1) / world;
}

uint64_t Sampler::padded(uint64_t start) const {
  const uint64_t m = start < n_ ? n_ - start : 0, total = samples_per_rank(start) * options_.world;
  return total > m ? total - m : 0;
}

uint64_t Sampler::unpadded_samples(uint64_t start) const {
  const uint64_t m = start < n_ ? n_ - start : 0, rank = static_cast<uint64_t>(options_.rank);
  const uint64_t world = static_cast<uint64_t>(options_.world);
  const uint64_t real = m > rank ? (m - rank + world - 1) / world : 0;  // positions rank + k x world below m
  return std::min(real, samples_per_rank(start));
}

uint64_t Sampler::dropped(uint64_t start) const {
  const uint64_t m = start < n_ ? n_ - start : 0, total = samples_per_rank(start) * options_.world;
  return total < m ? m - total : 0;
}

StatusOr<ShuffleMode> ParseShuffleMode(const std::string& name) {
  if (name == "full") return ShuffleMode::kFull;
  if (name == "block") return ShuffleMode::kBlock;
  if (name == "none") return ShuffleMode::kNone;
  return Status::InvalidArgument("--shuffle " + name + ": expected full, block or none");
}

std::vector<uint64_t> Sampler::EpochIndices(uint64_t epoch, uint64_t start) const {
  std::vector<uint64_t> order;
  const ShuffleMode mode = options_.mode;
  if (mode == ShuffleMode::kFull) {
    order = EpochPermutation(n_, options_.seed, epoch);
  } else if (mode == ShuffleMode::kBlock) {
    order = BlockPermutation(n_, options_.seed, epoch, options_.block_samples, options_.block_window);
  } else {
    order.resize(n_);
    std::iota(order.begin(), order.end(), uint64_t{0});
  }
  const uint64_t per_rank = samples_per_rank(start);
  const uint64_t m = n_ - std::min(start, n_);
  std::vector<uint64_t> mine(per_rank);
  const uint64_t world = static_cast<uint64_t>(options_.world);
  for (uint64_t k = 0; k < per_rank; ++k) {
    // Positions past the end wrap to the epoch's (remaining) start: the padding.
    mine[k] = order[start + (static_cast<uint64_t>(options_.rank) + k * world) % m];
  }
  return mine;
}

}  // namespace granary
