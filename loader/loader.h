// Loader: a prefetching reader that turns one split of a db into batches for
// one rank. Worker threads read records with pread through the split's record
// index (store/db.h's SplitReader), check and decompress them, and fill
// preallocated batch buffers up to `prefetch` batches ahead of the consumer.
//
// Threads: one consumer thread calls StartEpoch/Next; the Loader owns its
// workers. The DbReader must outlive the Loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/machine.h"
#include "base/status.h"
#include "loader/augment.h"
#include "loader/sampler.h"
#include "store/db.h"

namespace granary {

// ImageNet's per-channel mean and std of RGB values scaled to [0, 1]: what
// `loader bench --normalize` and Python's normalize=True apply to RGB images.
inline const std::vector<float> kImageNetMean = {0.485f, 0.456f, 0.406f};
inline const std::vector<float> kImageNetStd = {0.229f, 0.224f, 0.225f};

// The loader's bounds, in one place: Loader::Create refuses options outside
// them, and every front end (train's flags, `loader bench`, granary.Loader)
// checks its flags against them before any work starts. Loader threads
// mostly wait on reads, so a few per core can still help.
inline constexpr int kLoaderThreadsPerCore = 4;
inline constexpr int kMaxLoaderPrefetch = 256;       // batches prepared ahead
inline constexpr size_t kMaxLoaderBatch = 1 << 20;   // samples per batch

// Whether the loader drops what it has read from the page cache. Block
// shuffling reads a split window by window (sampler.h); where the split is
// larger than the memory the process may use, a window's pages are of no use
// once it is read (the next epoch reads the split in another order before
// it comes back), yet keeping them makes the kernel reclaim a page for every
// page read, on the loader's cores (docs/BENCHMARKS.md, "A db larger than
// memory").
enum class ReadCache {
  kAuto,     // kRelease under block shuffling of a split larger than MemoryLimitBytes(), else kKeep
  kKeep,     // leave the page cache to the kernel
  kRelease,  // block shuffling only: a window's pages are dropped a few windows after it is read, or, for one
             // rank, windows are read around the page cache (direct I/O)
};

struct LoaderOptions {
  std::string split = "train";
  size_t batch_size = 64;  // per rank; the last batch of an epoch may be smaller
  SamplerOptions sampler;
  int threads = 1;   // worker threads
  int prefetch = 4;  // batches ready or in flight ahead of the consumer
  std::string input_field = "image";  // any numeric dtype, converted to float32
  std::string target_field = "label";  // a scalar: an integer (a class), converted to int64, or a float
                                       // (a regression target), converted to float32
  // input = (value * scale - mean) / stddev, elementwise; per channel (of a
  // C x H x W input) when channel_mean / channel_std are given.
  float scale = 1.0f / 255.0f;
  float mean = 0.0f;
  float stddev = 1.0f;
  std::vector<float> channel_mean;
  std::vector<float> channel_std;
  // uint8_batches: raw uint8 values in Batch::input_u8 (no scaling or
  // normalisation; the input field must be uint8; no random-resized crop).
  // channels_last: image batches as N x H x W x C instead of N x C x H x W.
  bool uint8_batches = false;
  bool channels_last = false;
  // Skip records that fail their checks (counted in stats) instead of
  // failing; the batches holding them come out smaller.
  bool skip_corrupt = false;
  // Random crops and flips of image inputs, before normalisation; a pure
  // function of (sampler seed, epoch, sample index). Off for evaluation.
  AugmentOptions augment;
  ReadCache read_cache = ReadCache::kAuto;
};

// A batch: `input` holds size x (input field's shape) float32 values, row-major;
// image fields stored HWC are batched as CHW (NCHW batches) unless
// channels_last asks for NHWC. With uint8_batches the values are in input_u8.
struct Batch {
  uint64_t epoch = 0;
  uint64_t index = 0;  // within the epoch
  size_t size = 0;
  size_t skipped = 0;  // corrupt samples left out (skip_corrupt)
  // Why, one line each ("train/shard-00000.mdb, key 12: checksum mismatch"),
  // for the caller to name them: nothing is skipped silently.
  std::vector<std::string> skipped_reasons;
  Shape input_shape;  // {size, ...sample shape in the batch's layout}
  std::vector<float> input;
  std::vector<uint8_t> input_u8;
  // The targets: classes in `target`, or, where the target field is a float
  // (value_target), the values to predict in `target_values`.
  bool value_target = false;
  std::vector<int64_t> target;
  std::vector<float> target_values;
};

// Where a rank is in an epoch, to save with a checkpoint: the epoch and how
// many positions of the epoch's global order all ranks together have consumed
// (ranks consume in lockstep). Restoring it, with any world size, continues
// the epoch over the samples not yet consumed, each exactly once (plus the
// padding that makes ranks equal).
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t position = 0;
};

struct LoaderStats {
  uint64_t batches = 0;
  double wait_seconds = 0;  // time Next() spent waiting for a batch (the stall)
  uint64_t skipped_corrupt = 0;  // with skip_corrupt
  uint64_t ready_sum = 0;         // batches ready when Next() was called, summed
  double mean_queue_depth() const { return batches > 0 ? static_cast<double>(ready_sum) / batches : 0.0; }
};

class Loader {
 public:
  // InvalidArgument for bad options (batch 0, threads or prefetch < 1, fields
  // missing or of unusable type, bad rank/world); NotFound for a missing split.
  static StatusOr<std::unique_ptr<Loader>> Create(const DbReader& db, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  const Sampler& sampler() const;
  // One sample's input as the batches hold it, before channels_last: C x H x W
  // for an image field whatever its stored layout, else the field's shape.
  const Shape& sample_shape() const;
  // Batches of the epoch started last (of a whole epoch before any).
  uint64_t batches_per_epoch() const;

  // Starts prefetching `epoch` from global position `position` (0: the whole
  // epoch), abandoning what is left of the current one.
  void StartEpoch(uint64_t epoch, uint64_t position = 0);
  // The state after the batches Next() has returned so far.
  LoaderState state() const;
  // Moves the next batch into *batch, recycling *batch's buffers. Returns false
  // once the epoch is exhausted, or the first read error (naming shard and key).
  StatusOr<bool> Next(Batch* batch);

  LoaderStats stats() const;
  // Whether read windows leave the page cache (ReadCache, as decided).
  bool releases_read_pages() const;
  // Whether they are read around it (direct I/O, a thread reading the next
  // window ahead): where they leave it, this is the only rank and the
  // windows fit in half the memory, on a file system with direct I/O. Read
  // as usual otherwise, or once a direct read failed.
  bool reads_around_page_cache() const;
  // That failure (a file system without direct I/O, a read error), for a
  // note; OK if none.
  Status direct_read_failure() const;

 private:
  struct Impl;
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
