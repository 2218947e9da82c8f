// What a rank trains on, micro-batch by micro-batch: its share of the
// training split through its loader, or with --synthetic one random batch of
// the loader's shape every step (a compute-bound run: no data, no sync).
// Training thread only.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "loader/loader.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/loop/step.h"
#include "trainer/report/observer.h"

namespace granary {

class TrainBatches {
 public:
  virtual ~TrainBatches() = default;
  // Epoch `epoch` (0-based), `position` samples of its global order already
  // trained (a resumed epoch).
  virtual void StartEpoch(uint64_t epoch, uint64_t position) = 0;
  // The next micro-batch, valid until the next call; false when the epoch has
  // no more.
  virtual StatusOr<bool> Next(MicroBatch* next) = 0;
};

// The batches of `config` for rank `rank`: `loader`'s (its skipped records
// told to `observer`), or the --synthetic one (random labels of `workload`'s
// classes, or random values of its regression target). `loader` and
// `observer` must outlive them.
StatusOr<std::unique_ptr<TrainBatches>> MakeTrainBatches(const TrainConfig& config, Loader& loader,
                                                         const Workload& workload, int rank, RunObserver& observer);

}  // namespace granary
