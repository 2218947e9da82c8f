// Every loader a run opens, its options in one place: what they all share
// (the workload's fields and scaling, --mean/--std, loader threads and
// prefetch, corrupt-record handling) and what each reads.
#pragma once

#include <cstddef>

#include "loader/loader.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"

namespace granary {

// The eval split's batch: training's evaluation, --quantize's, --eval-only's.
inline constexpr size_t kEvalBatchSize = 256;

// What every loader of a run shares.
LoaderOptions BaseLoaderOptions(const DataConfig& data, const Workload& workload);

// Rank `rank`'s share of each epoch of the training split: a micro-batch
// (TrainConfig::MicroBatchSize), the run's shuffle, augmentation and layout.
LoaderOptions TrainLoaderOptions(const TrainConfig& config, const Workload& workload, int rank);

// The eval split in batches of kEvalBatchSize (Evaluate shares it between
// ranks, in order, unaugmented).
LoaderOptions EvalLoaderOptions(const DataConfig& data, const Workload& workload, bool channels_last);

// The training split, unaugmented, in batches of `batch_size`: in order
// (input statistics), or in the run's shuffled order of epoch 0 with
// `shuffled` (INT8 calibration: a class-sorted db sampled across classes).
LoaderOptions TrainSplitPassOptions(const TrainConfig& config, const Workload& workload, size_t batch_size,
                                    bool shuffled);

// `options` made to read its split once, in order (rank 0 of 1 until the
// caller shares it), unaugmented: evaluation and input statistics.
LoaderOptions WholeSplitPass(LoaderOptions options);

}  // namespace granary
