// A Loader's options checked against their bounds and the db before any
// worker runs, and what they make of a batch: its two fields, its shapes and
// its normalisation. Internal to loader.
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"
#include "loader/loader.h"
#include "store/db.h"

namespace granary {

// What a batch is made of: its two fields, their types, and the input's
// shape as stored, as converted (CHW for an image stored HWC) and as batched
// (HWC again with channels_last).
struct BatchGeometry {
  int input_index = 0, target_index = 0;
  DType input_dtype = DType::kUInt8, target_dtype = DType::kInt64;
  bool value_target = false;  // a float target (regression): Batch::target_values
  Shape field_shape, sample_shape, batch_shape;
  bool hwc = false;
  size_t sample_elements = 0;
};

// How values are normalised: fused into the conversion (one mean and std for
// every value), or per channel (augmentation, per-channel statistics).
struct Normalisation {
  bool fused = true;
  std::vector<float> means, inv_stds;  // per channel, when not fused
};

// The options' bounds (loader.h), before anything is opened.
Status CheckBounds(const LoaderOptions& options);

// The batch the options make of `db`'s input and target fields;
// InvalidArgument naming the field where they cannot make one (a field
// missing, a target that is not a scalar, a variable shape, ...).
StatusOr<BatchGeometry> ResolveGeometry(const DbReader& db, const LoaderOptions& options);

// The prefetch slots hold `prefetch` batches at once: refuse what cannot fit.
Status CheckPrefetchFits(const LoaderOptions& options, size_t sample_elements);

// How the options normalise a batch of geometry `g`; InvalidArgument for
// normalisation or augmentation of an input that is not an image, or
// per-channel values that do not fit it.
StatusOr<Normalisation> ResolveNormalisation(const LoaderOptions& options, const BatchGeometry& g);

}  // namespace granary
