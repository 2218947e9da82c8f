// Sampler: which samples each rank reads in each epoch. A pure function of
// (dataset size, seed, epoch, rank, world); immutable and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

enum class ShuffleMode {
  kNone,   // index order (evaluation)
  kFull,   // a uniform permutation of the whole split
  kBlock,  // chunks of consecutive samples in random order, then shuffled within a
           // window of chunks: reads stay local for dbs larger than RAM
};

// The mode called "full", "block" or "none" (the loader tools' --shuffle);
// InvalidArgument naming the flag otherwise.
StatusOr<ShuffleMode> ParseShuffleMode(const std::string& name);

struct SamplerOptions {
  uint64_t seed = 0;
  // Drop the tail so every rank gets floor(n / world) samples; otherwise pad
  // by wrapping around to the start of the order so every rank gets ceil(n / world).
  bool drop_last = false;
  int rank = 0;
  int world = 1;
  ShuffleMode mode = ShuffleMode::kFull;
  uint64_t block_samples = 256;  // kBlock: samples per chunk
  uint64_t block_window = 16;    // kBlock: chunks shuffled together
};

class Sampler {
 public:
  // InvalidArgument for world < 1, rank outside [0, world), or an empty dataset.
  static StatusOr<Sampler> Create(uint64_t dataset_size, const SamplerOptions& options);

  uint64_t dataset_size() const { return n_; }
  const SamplerOptions& options() const { return options_; }

  // An epoch may start at a position `start` of its global order (a run
  // resumed mid-epoch, perhaps with another world size): the positions
  // start .. n-1 are then dealt to the ranks. All counts below are for that.
  // The same for every rank.
  uint64_t samples_per_rank(uint64_t start = 0) const;
  // Over all ranks: samples read twice (padding) or not at all (dropped).
  uint64_t padded(uint64_t start = 0) const;
  // This rank's samples that are not padding: its first ones (padding comes
  // last, in the ranks whose positions wrap around).
  uint64_t unpadded_samples(uint64_t start = 0) const;
  uint64_t dropped(uint64_t start = 0) const;

  // This rank's samples for `epoch`, in reading order: positions start + rank,
  // start + rank + world, ... of the epoch's global order, wrapping around
  // within start .. n-1 to pad.
  std::vector<uint64_t> EpochIndices(uint64_t epoch, uint64_t start = 0) const;

 private:
  Sampler(uint64_t n, const SamplerOptions& options) : n_(n), options_(options) {}

  uint64_t n_;
  SamplerOptions options_;
};

// The global order of epoch `epoch`: a permutation of [0, n) by Fisher-Yates
// driven by SplitMix64 seeded from (seed, epoch), as docs/FORMAT.md's
// "Epoch order" spells out so other languages can reproduce it.
std::vector<uint64_t> EpochPermutation(uint64_t n, uint64_t seed, uint64_t epoch);

// The block-shuffled order of epoch `epoch`: the chunks [k*B, (k+1)*B) of
// [0, n) in a random order (Fisher-Yates as above, seeded from (seed, epoch)),
// then, group by group of W chunks of that order, the group's samples
// shuffled by the same generator, continuing.
std::vector<uint64_t> BlockPermutation(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t block_samples,
                                       uint64_t block_window);

}  // namespace granary
