#include "loader/batch_options.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/machine.h"

namespace granary {

// The options' bounds (loader.h), before anything is opened.
Status CheckBounds(const LoaderOptions& options) {
  if (options.batch_size == 0 || options.batch_size > kMaxLoaderBatch) {
    return Status::InvalidArgument("batch size " + std::to_string(options.batch_size) + ": must be in 1.." +
                                   std::to_string(kMaxLoaderBatch));
  }
  const int max_threads = kLoaderThreadsPerCore * UsableCpuCount();
  if (options.threads < 1 || options.threads > max_threads) {
    return Status::InvalidArgument("loader threads " + std::to_string(options.threads) + ": must be in 1.." +
                                   std::to_string(max_threads) + " (" + std::to_string(kLoaderThreadsPerCore) +
                                   " x the CPUs this process may use)");
  }
  if (options.prefetch < 1 || options.prefetch > kMaxLoaderPrefetch) {
    return Status::InvalidArgument("prefetch " + std::to_string(options.prefetch) + ": must be in 1.." +
                                   std::to_string(kMaxLoaderPrefetch));
  }
  if (!(options.stddev > 0)) return Status::InvalidArgument("normalisation stddev must be > 0");
  return Status::OK();
}

StatusOr<BatchGeometry> ResolveGeometry(const DbReader& db, const LoaderOptions& options) {
  BatchGeometry g;
  const Schema& schema = db.schema();
  g.input_index = schema.FieldIndex(options.input_field);
  g.target_index = schema.FieldIndex(options.target_field);
  if (g.input_index < 0) return Status::InvalidArgument(db.path() + ": no field '" + options.input_field + "'");
  if (g.target_index < 0) return Status::InvalidArgument(db.path() + ": no field '" + options.target_field + "'");
  const FieldSpec& input = schema.fields[g.input_index];
  const FieldSpec& target = schema.fields[g.target_index];
  if (input.HasVariableDims()) {
    return Status::InvalidArgument(db.path() + ": field '" + input.name +
                                   "' has variable dims; batching needs a fixed shape (read such a field with "
                                   "granary.Dataset in a DataLoader: collate_fn=granary.pad_collate pads each "
                                   "batch to its longest sample, or a transform makes it one shape)");
  }
  if (!target.shape.empty()) {
    return Status::InvalidArgument(db.path() + ": field '" + target.name + "' has shape " +
                                   ShapeToString(target.shape) +
                                   ": a target is a scalar (a class, or a number to predict); masks and boxes are "
                                   "read with granary.Dataset in a DataLoader (README, \"Masks and boxes\")");
  }
  g.input_dtype = input.dtype;
  g.target_dtype = target.dtype;
  g.value_target = IsFloatDType(target.dtype);
  g.field_shape = input.shape;
  g.sample_shape = input.shape;
  if (input.layout == "HWC") {
    if (input.dtype != DType::kUInt8) return Status::InvalidArgument("HWC field '" + input.name + "' must be uint8");
    g.hwc = true;
    g.sample_shape = {input.shape[2], input.shape[0], input.shape[1]};
  }
  g.sample_elements = static_cast<size_t>(input.FixedElements());
  g.batch_shape = g.sample_shape;
  if (options.channels_last) {
    if (g.sample_shape.size() != 3) {
      return Status::InvalidArgument("channels_last needs a C x H x W input, field '" + input.name + "' has shape " +
                                     ShapeToString(input.shape));
    }
    g.batch_shape = {g.sample_shape[1], g.sample_shape[2], g.sample_shape[0]};
  }
  if (options.uint8_batches && (input.dtype != DType::kUInt8 || options.augment.random_resized_crop)) {
    return Status::InvalidArgument("uint8 batches need a uint8 field and no random-resized crop");
  }
  return g;
}

// The prefetch slots hold `prefetch` batches at once: refuse what cannot fit.
Status CheckPrefetchFits(const LoaderOptions& options, size_t sample_elements) {
  const double batches_bytes = static_cast<double>(options.prefetch) * static_cast<double>(options.batch_size) *
                               static_cast<double>(sample_elements) * sizeof(float);
  // A container's memory limit (its cgroup's) where it is less than the machine's.
  const double machine_bytes = static_cast<double>(MachineMemoryBytes());
  const double memory_bytes = std::min(machine_bytes, static_cast<double>(MemoryLimitBytes()));
  if (batches_bytes <= memory_bytes / 2) return Status::OK();
  char text[200];
  std::snprintf(text, sizeof(text), "prefetch %d x batch %zu: %.1f GiB of batches, more than half of %s%.1f GiB%s",
                options.prefetch, options.batch_size, batches_bytes / (1 << 30),
                memory_bytes < machine_bytes ? "the " : "this machine's ", memory_bytes / (1 << 30),
                memory_bytes < machine_bytes ? " its memory cgroup allows" : "");
  return Status::InvalidArgument(text);
}

StatusOr<Normalisation> ResolveNormalisation(const LoaderOptions& options, const BatchGeometry& g) {
  Normalisation n;
  const bool per_channel = !options.channel_mean.empty() || !options.channel_std.empty();
  if (g.sample_shape.size() != 3 && (options.mean != 0.0f || options.stddev != 1.0f || per_channel)) {
    return Status::InvalidArgument("normalisation is for images (C x H x W): field '" + options.input_field +
                                   "' has shape " + ShapeToString(g.field_shape) + " (features are given raw)");
  }
  if (!options.augment.any() && !per_channel) return n;
  if (g.sample_shape.size() != 3) {
    return Status::InvalidArgument("augmentation and per-channel normalisation need a C x H x W input, field '" +
                                   options.input_field + "' has shape " + ShapeToString(g.field_shape));
  }
  const size_t c = static_cast<size_t>(g.sample_shape[0]);
  if ((!options.channel_mean.empty() && options.channel_mean.size() != c) ||
      (!options.channel_std.empty() && options.channel_std.size() != c)) {
    return Status::InvalidArgument("per-channel mean/std need " + std::to_string(c) + " values");
  }
  for (float v : options.channel_std) {
    if (!(v > 0)) return Status::InvalidArgument("per-channel std must be > 0");
  }
  if (options.augment.crop_padding < 0 || !(options.augment.min_scale > 0 && options.augment.min_scale <= 1)) {
    return Status::InvalidArgument("crop padding must be >= 0 and the random-resized-crop scale in (0, 1]");
  }
  n.fused = false;
  for (size_t ch = 0; ch < c; ++ch) {
    n.means.push_back(options.channel_mean.empty() ? options.mean : options.channel_mean[ch]);
    n.inv_stds.push_back(1.0f / (options.channel_std.empty() ? options.stddev : options.channel_std[ch]));
  }
  return n;
}

}  // namespace granary
