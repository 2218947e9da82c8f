// Whether a db gets a zstd dictionary, and which: `--dictionary on` trains
// one, `auto` keeps it only where packing says it pays (preprocess/build.cc
// calls it before the first split). Internal to preprocess.
#pragma once

#include <cstdint>
#include <string>

#include "preprocess/build.h"
#include "preprocess/source.h"

namespace granary {

// Records whose payload is at most this are "small": a dictionary pays off.
inline constexpr uint64_t kSmallRecordBytes = 4 << 10;

// Trains a dictionary on evenly spaced items of `split` (rejected items are
// left out). Returns "" with *note saying why when there is to be none. In
// auto mode the dictionary is kept only if a trial says the split's records
// shrink by more than its own size: the trial packs held-out items (all items
// when the split is no larger than the training sample) with and without it.
StatusOr<std::string> MaybeTrainDictionary(const Schema& schema, const SplitSource& split, const BuildOptions& options,
                                           size_t block_bytes, std::string* note);

}  // namespace granary
