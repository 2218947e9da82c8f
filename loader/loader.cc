#include "loader/loader.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "base/file.h"
#include "base/mutex.h"
#include "loader/batch_options.h"
#include "loader/pixels.h"
#include "loader/window_stager.h"

namespace granary {
namespace {

// One of the prefetched batches: filled by a worker, taken by Next().
struct Slot {
  bool ready = false;
  Status status;
  Batch batch;
};

}  // namespace

struct Loader::Impl {
  Impl(const LoaderOptions& o, Sampler s, const BatchGeometry& g, Normalisation n,
       std::vector<std::unique_ptr<SplitReader>> r)
      : options(o),
        sampler(std::move(s)),
        geometry(g),
        normalisation(std::move(n)),
        scratch(static_cast<size_t>(o.threads)),
        readers(std::move(r)) {}

  const LoaderOptions options;
  const Sampler sampler;
  const BatchGeometry geometry;
  const Normalisation normalisation;
  // Block shuffling: this rank's positions in one window of chunks (0: not
  // block shuffling), whether windows read leave the page cache (ReadCache),
  // and how many windows behind the one a worker starts that happens (a
  // worker may lag it by up to the prefetched batches).
  uint64_t window_positions = 0;
  bool release_read_pages = false;
  uint64_t release_lag_windows = 0;
  // Where windows leave the page cache and one rank reads the split (no
  // other rank of the node shares its pages), the next window's chunks are
  // read around it, on a thread of their own, while this one is decoded; a
  // worker waits for its batch's windows to be staged.
  std::unique_ptr<WindowStager> stager;
  std::vector<std::vector<float>> scratch;  // per worker, for augmentation
  std::vector<std::unique_ptr<SplitReader>> readers;  // one per worker

  // The stream: batches of epoch stream_epoch from stream_position, then of
  // the following whole epochs, numbered g = 0, 1, ... Workers run ahead into
  // the next epoch, so a new epoch starts without a stall.
  // Invariant: a worker fills batch g only once g < consumed + prefetch, so
  // slot g % prefetch held batch g - prefetch, which the consumer has taken.
  // The stream's shape (stream_epoch to epoch_batches) is set while no
  // worker runs (StartEpoch, between StopWorkers and starting them), and
  // only read while they do: it needs no lock.
  uint64_t stream_epoch = 0;
  uint64_t stream_position = 0;
  uint64_t first_epoch_batches = 0;  // of stream_epoch, from stream_position
  uint64_t epoch_batches = 0;        // of a whole epoch
  std::vector<std::thread> workers;  // the consumer's thread only
  // What the workers and the consumer share.
  mutable Mutex mu;
  CondVar cv;  // a slot filled or taken, or stop
  std::vector<Slot> slots GRANARY_GUARDED_BY(mu);
  uint64_t consumed GRANARY_GUARDED_BY(mu) = 0;  // batches of the stream taken by Next()
  // The epoch Next() is in: its number, where it started in the stream and
  // in the epoch's order, and its samples taken so far.
  uint64_t epoch GRANARY_GUARDED_BY(mu) = 0;
  uint64_t epoch_first_batch GRANARY_GUARDED_BY(mu) = 0;
  uint64_t start_position GRANARY_GUARDED_BY(mu) = 0;
  uint64_t samples_consumed GRANARY_GUARDED_BY(mu) = 0;
  bool stop GRANARY_GUARDED_BY(mu) = false;
  bool running GRANARY_GUARDED_BY(mu) = false;
  LoaderStats stats GRANARY_GUARDED_BY(mu);
  // This rank's orders of recent epochs, guarded by order_mu (not mu, so the
  // consumer never waits for an order being computed).
  Mutex order_mu;
  std::map<uint64_t, std::shared_ptr<const std::vector<uint64_t>>> orders GRANARY_GUARDED_BY(order_mu);

  void StopWorkers() GRANARY_EXCLUDES(mu) {
    {
      MutexLock lock(&mu);
      stop = true;
    }
    cv.NotifyAll();
    for (std::thread& t : workers) t.join();
    workers.clear();
    MutexLock lock(&mu);
    running = false;
  }

  uint64_t BatchesOf(uint64_t e) const { return e == stream_epoch ? first_epoch_batches : epoch_batches; }

  // Epoch and batch within it of stream batch g.
  std::pair<uint64_t, uint64_t> Locate(uint64_t g) const {
    if (g < first_epoch_batches) return {stream_epoch, g};
    g -= first_epoch_batches;
    return {stream_epoch + 1 + g / epoch_batches, g % epoch_batches};
  }

  // This rank's order of epoch e, computed by the first worker to need it
  // while the others wait for it, and kept while it is recent.
  std::shared_ptr<const std::vector<uint64_t>> Order(uint64_t e) {
    MutexLock lock(&order_mu);
    auto it = orders.find(e);
    if (it != orders.end()) return it->second;
    auto order = std::make_shared<const std::vector<uint64_t>>(
        sampler.EpochIndices(e, e == stream_epoch ? stream_position : 0));
    orders.emplace(e, order);
    // Workers span the consumer's epoch and the next one; older orders are
    // dropped (8 bytes a sample each), and would just be recomputed if needed.
    while (orders.size() > 2) orders.erase(orders.begin());
    return order;
  }

  // The augmentation of sample `index` in epoch e (an identity plan when
  // augmentation is off). Precondition: a C x H x W sample shape.
  AugmentPlan PlanFor(uint64_t e, uint64_t index) const {
    if (!options.augment.any()) return AugmentPlan();
    return PlanAugment(options.augment, AugmentKey(options.sampler.seed, e, index),
                       static_cast<int>(geometry.sample_shape[1]), static_cast<int>(geometry.sample_shape[2]));
  }

  // One sample's input as normalised (and augmented) float C x H x W (or the
  // field's own shape for non-images) at dst.
  void ConvertFloat(int worker, uint64_t e, uint64_t index, const FieldView& in, float* dst) {
    const float inv_std = 1.0f / options.stddev;
    if (normalisation.fused) {  // normalisation folded into the conversion
      if (geometry.hwc) {
        HwcToChw(in.data, geometry.field_shape, options.scale, options.mean, inv_std, dst);
      } else {
        ToFloat(geometry.input_dtype, in.data, geometry.sample_elements, options.scale, options.mean, inv_std, dst);
      }
      return;
    }
    const int h = static_cast<int>(geometry.sample_shape[1]), w = static_cast<int>(geometry.sample_shape[2]);
    const AugmentPlan plan = PlanFor(e, index);
    if (geometry.hwc && !plan.resized_crop) {
      HwcToChwShifted(in.data, geometry.field_shape, plan, options.scale, normalisation.means, normalisation.inv_stds,
                      dst);  // one pass
      return;
    }
    if (geometry.hwc) {
      HwcToChw(in.data, geometry.field_shape, options.scale, 0.0f, 1.0f, dst);
    } else {
      ToFloat(geometry.input_dtype, in.data, geometry.sample_elements, options.scale, 0.0f, 1.0f, dst);
    }
    ApplyAugment(plan, static_cast<int>(geometry.sample_shape[0]), h, w, dst, &scratch[worker]);
    const size_t plane = static_cast<size_t>(h) * w;
    for (size_t ch = 0; ch < normalisation.means.size(); ++ch) {
      float* p = dst + ch * plane;
      for (size_t k = 0; k < plane; ++k) p[k] = (p[k] - normalisation.means[ch]) * normalisation.inv_stds[ch];
    }
  }

  // Block shuffling reads a window of whole chunks in random order, then the
  // next window (sampler.h). The worker whose batch starts a window has the
  // next window's chunks read ahead, each whole: a few large reads, done
  // while this window is decoded, instead of a small one per record. They
  // are staged (read around the page cache) where there is a stager, else
  // the kernel is asked for them. With release_read_pages it drops the
  // chunks of the window release_lag_windows back from the page cache (those
  // read through it), so it never fills and the kernel never has to reclaim.
  void AdviseWindows(SplitReader& reader, uint64_t e, const std::vector<uint64_t>& indices, uint64_t first,
                     size_t size) const {
    const uint64_t window = window_positions;
    const uint64_t chunk = options.sampler.block_samples;
    // The chunks of positions [from, from + window) of `indices`, each once.
    const auto chunks_of = [&](uint64_t from) {
      std::vector<uint64_t> chunks;
      for (uint64_t i = from; i < std::min<uint64_t>(from + window, indices.size()); ++i) {
        chunks.push_back(indices[i] / chunk);
      }
      std::sort(chunks.begin(), chunks.end());
      chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
      return chunks;
    };
    const auto read_ahead = [&](uint64_t from) {
      if (stager != nullptr && stager->working()) {
        std::vector<std::pair<uint64_t, uint64_t>> ranges;
        for (uint64_t c : chunks_of(from)) ranges.emplace_back(c * chunk, (c + 1) * chunk);
        if (!ranges.empty()) stager->Request(WindowKey(e, from), std::move(ranges));
        return;
      }
      for (uint64_t c : chunks_of(from)) reader.Advise(c * chunk, (c + 1) * chunk, SplitReader::Advice::kWillNeed);
    };
    if (first == 0) read_ahead(0);
    const uint64_t lag = release_lag_windows * window;
    for (uint64_t g = (first + window - 1) / window * window; g < first + size; g += window) {
      read_ahead(g + window);
      if (release_read_pages && g >= lag) {
        for (uint64_t c : chunks_of(g - lag)) reader.Advise(c * chunk, (c + 1) * chunk, SplitReader::Advice::kWontNeed);
      }
    }
  }

  // The stager's name for the window of epoch e's order holding position p.
  uint64_t WindowKey(uint64_t e, uint64_t p) const { return (e << 32) ^ (p / window_positions); }

  Status Fill(int worker, uint64_t e, uint64_t b, const std::vector<uint64_t>& indices, Batch* batch) {
    const size_t bs = options.batch_size;
    const uint64_t first = b * bs;
    const size_t size = static_cast<size_t>(std::min<uint64_t>(bs, indices.size() - first));
    batch->epoch = e;
    batch->index = b;
    batch->size = size;
    batch->input_shape.assign(1, static_cast<int64_t>(size));
    batch->input_shape.insert(batch->input_shape.end(), geometry.batch_shape.begin(), geometry.batch_shape.end());
    if (options.uint8_batches) {
      batch->input_u8.resize(size * geometry.sample_elements);
    } else {
      batch->input.resize(size * geometry.sample_elements);
    }
    batch->value_target = geometry.value_target;
    (geometry.value_target ? batch->target_values.resize(size) : batch->target.resize(size));
    batch->skipped_reasons.clear();
    if (window_positions > 0) {
      AdviseWindows(*readers[worker], e, indices, first, size);
      if (stager != nullptr) {  // the batch's windows staged before they are read
        for (uint64_t p = first; p < first + size; p = (p / window_positions + 1) * window_positions) {
          stager->Wait(WindowKey(e, p));
        }
      }
    } else {
      // The order is known ahead: ask the kernel for the next batch this worker
      // will fill while decoding this one (a no-op when the db is cached).
      const uint64_t ahead = first + options.batch_size * static_cast<uint64_t>(options.threads);
      for (uint64_t i = ahead; i < std::min<uint64_t>(ahead + options.batch_size, indices.size()); ++i) {
        readers[worker]->Advise(indices[i], indices[i] + 1, SplitReader::Advice::kWillNeed);
      }
    }
    const FieldView* fields = nullptr;
    size_t kept = 0;
    for (size_t i = 0; i < size; ++i) {
      const uint64_t index = indices[first + i];
      Status read = readers[worker]->Read(index, &fields);
      if (!read.ok()) {
        if (!(options.skip_corrupt && read.code() == Status::Code::kCorruption)) return read;
        batch->skipped_reasons.push_back("sample " + std::to_string(index) + ": " + read.message());
        continue;
      }
      const FieldView& in = fields[geometry.input_index];
      if (in.shape != geometry.field_shape) {
        return Status::InvalidArgument("split '" + options.split + "', sample " + std::to_string(index) +
                                       ": field '" + options.input_field + "' has shape " + ShapeToString(in.shape) +
                                       ", the batch needs " + ShapeToString(geometry.field_shape));
      }
      const size_t out = kept++;
      if (geometry.value_target) {
        batch->target_values[out] = ScalarAs<float>(geometry.target_dtype, fields[geometry.target_index].data);
      } else {
        batch->target[out] = ScalarAs<int64_t>(geometry.target_dtype, fields[geometry.target_index].data);
      }
      if (options.uint8_batches) {
        uint8_t* dst = batch->input_u8.data() + out * geometry.sample_elements;
        if (geometry.sample_shape.size() != 3) {
          std::memcpy(dst, in.data, geometry.sample_elements);
          continue;
        }
        const Shape& shape = geometry.sample_shape;
        CopyImage(in.data, static_cast<int>(shape[0]), static_cast<int>(shape[1]), static_cast<int>(shape[2]),
                  geometry.hwc, PlanFor(e, index), options.channels_last, dst);
        continue;
      }
      float* dst = batch->input.data() + out * geometry.sample_elements;
      ConvertFloat(worker, e, index, in, dst);
      // Computed as CHW, then transposed: NHWC float is the rarer request.
      if (options.channels_last) ChwToHwc(geometry.sample_shape, dst, &scratch[worker]);
    }
    batch->skipped = size - kept;
    if (kept < size) {  // skipped corrupt samples
      batch->size = kept;
      batch->input_shape[0] = static_cast<int64_t>(kept);
      (options.uint8_batches ? batch->input_u8.resize(kept * geometry.sample_elements)
                             : batch->input.resize(kept * geometry.sample_elements));
      (geometry.value_target ? batch->target_values.resize(kept) : batch->target.resize(kept));
    }
    return Status::OK();
  }

  void Work(int worker) GRANARY_EXCLUDES(mu) {
    const uint64_t prefetch = options.prefetch;
    const uint64_t step = workers_count();
    for (uint64_t g = static_cast<uint64_t>(worker);; g += step) {
      Batch batch;
      {
        MutexLock lock(&mu);
        cv.Wait(mu, [&] {
          mu.AssertHeld();
          return stop || g < consumed + prefetch;
        });
        if (stop) return;
        assert(!slots[g % prefetch].ready && "the slot still holds batch g - prefetch, not yet consumed");
        std::swap(batch, slots[g % prefetch].batch);  // take the slot's buffers
      }
      const auto [e, b] = Locate(g);
      Status status = Fill(worker, e, b, *Order(e), &batch);
      {
        MutexLock lock(&mu);
        Slot& slot = slots[g % prefetch];
        std::swap(slot.batch, batch);
        slot.status = status;
        slot.ready = true;
      }
      cv.NotifyAll();
      if (!status.ok()) return;
    }
  }

  uint64_t workers_count() const { return static_cast<uint64_t>(options.threads); }
};

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() { impl_->StopWorkers(); }
const Sampler& Loader::sampler() const { return impl_->sampler; }
const Shape& Loader::sample_shape() const { return impl_->geometry.sample_shape; }
uint64_t Loader::batches_per_epoch() const {
  MutexLock lock(&impl_->mu);
  return impl_->running ? impl_->BatchesOf(impl_->epoch) : impl_->epoch_batches;
}
LoaderState Loader::state() const {
  const Impl& s = *impl_;
  MutexLock lock(&s.mu);
  const uint64_t world = static_cast<uint64_t>(s.options.sampler.world);
  return {s.epoch, std::min(s.sampler.dataset_size(), s.start_position + s.samples_consumed * world)};
}

bool Loader::releases_read_pages() const { return impl_->release_read_pages; }

bool Loader::reads_around_page_cache() const { return impl_->stager != nullptr && impl_->stager->working(); }

Status Loader::direct_read_failure() const {
  return impl_->stager != nullptr ? impl_->stager->failure() : Status::OK();
}

LoaderStats Loader::stats() const {
  MutexLock lock(&impl_->mu);
  return impl_->stats;
}

// More worker threads than this cannot be meant (each holds a reader).

StatusOr<std::unique_ptr<Loader>> Loader::Create(const DbReader& db, const LoaderOptions& options) {
  GRANARY_RETURN_IF_ERROR(CheckBounds(options));
  const SplitInfo* split = db.manifest().FindSplit(options.split);
  if (split == nullptr) return NoSuchSplit(db.manifest(), db.path(), options.split);
  // The workers' readers first: the first builds the split's record index
  // (shared by all of them), which checks split->count against the records
  // before anything is sized by it, and reports a damaged B-tree here rather
  // than in the first batch.
  std::vector<std::unique_ptr<SplitReader>> readers;
  for (int w = 0; w < options.threads; ++w) {
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<SplitReader> reader, SplitReader::Create(db, options.split));
    GRANARY_RETURN_IF_ERROR(reader->LoadIndex());
    readers.push_back(std::move(reader));
  }
  StatusOr<Sampler> sampler = Sampler::Create(split->count, options.sampler);
  if (!sampler.ok()) return sampler.status().WithContext(db.path() + ": split '" + options.split + "'");
  GRANARY_ASSIGN_OR_RETURN(const BatchGeometry geometry, ResolveGeometry(db, options));
  GRANARY_RETURN_IF_ERROR(CheckPrefetchFits(options, geometry.sample_elements));
  GRANARY_ASSIGN_OR_RETURN(Normalisation normalisation, ResolveNormalisation(options, geometry));

  auto impl = std::make_unique<Impl>(options, std::move(sampler).value(), geometry, std::move(normalisation),
                                     std::move(readers));
  const uint64_t chunk = options.sampler.block_samples, chunks = options.sampler.block_window;  // both >= 1
  if (options.sampler.mode == ShuffleMode::kBlock && chunks <= UINT64_MAX / 2 / chunk) {
    const uint64_t world = static_cast<uint64_t>(options.sampler.world);
    impl->window_positions = (chunk * chunks + world - 1) / world;
    uint64_t split_bytes = 0;
    for (const ShardInfo& shard : split->shards) split_bytes += shard.bytes;
    const uint64_t memory_bytes = MemoryLimitBytes();
    impl->release_read_pages = options.read_cache == ReadCache::kRelease ||
                               (options.read_cache == ReadCache::kAuto && split_bytes > memory_bytes);
    impl->release_lag_windows = 2 + options.prefetch * options.batch_size / impl->window_positions;
    if (impl->release_read_pages && world == 1 && split->count > 0) {
      // Staged: the windows a worker may still read (release_lag_windows
      // back), the one being staged and one more, with a page either side of
      // each chunk; where that is more than half the memory (windows of large
      // samples), the page cache's reclaim is left to pace the reads.
      const uint64_t window_samples = std::min<uint64_t>(chunk * chunks, split->count);
      const uint64_t window_bytes = split_bytes / split->count * window_samples +
                                    std::min<uint64_t>(chunks, split->count) * 2 * DirectRead::kAlignment;
      const uint64_t windows = impl->release_lag_windows + 2;
      if (window_bytes <= memory_bytes / 2 / windows) {
        GRANARY_ASSIGN_OR_RETURN(impl->stager, WindowStager::Create(db, options.split, windows * window_bytes));
      }
    }
  }
  const uint64_t per_rank = impl->sampler.samples_per_rank();
  impl->epoch_batches = (per_rank + options.batch_size - 1) / options.batch_size;
  {
    MutexLock lock(&impl->mu);  // no worker yet: for the analysis
    impl->slots.resize(options.prefetch);
  }
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

void Loader::StartEpoch(uint64_t epoch, uint64_t position) {
  Impl& s = *impl_;
  {
    MutexLock lock(&s.mu);
    // The next epoch of a running stream: its batches may be ready already.
    if (s.running && position == 0 && epoch == s.epoch + 1 &&
        s.consumed == s.epoch_first_batch + s.BatchesOf(s.epoch)) {
      s.epoch = epoch;
      s.epoch_first_batch = s.consumed;
      s.start_position = 0;
      s.samples_consumed = 0;
      return;
    }
  }
  s.StopWorkers();
  {
    MutexLock lock(&s.order_mu);
    s.orders.clear();
  }
  const uint64_t bs = s.options.batch_size;
  s.stream_epoch = epoch;
  s.stream_position = position;
  s.first_epoch_batches = (s.sampler.samples_per_rank(position) + bs - 1) / bs;
  s.epoch_batches = std::max<uint64_t>(1, (s.sampler.samples_per_rank(0) + bs - 1) / bs);
  {
    MutexLock lock(&s.mu);
    s.epoch = epoch;
    s.start_position = position;
    s.samples_consumed = 0;
    s.consumed = s.epoch_first_batch = 0;
    s.stop = false;
    for (Slot& slot : s.slots) {
      slot.ready = false;
      slot.status = Status::OK();
    }
    s.running = true;
  }
  for (int w = 0; w < s.options.threads; ++w) s.workers.emplace_back([&s, w] { s.Work(w); });
}

StatusOr<bool> Loader::Next(Batch* batch) {
  Impl& s = *impl_;
  const auto start = std::chrono::steady_clock::now();
  {
    MutexLock lock(&s.mu);
    if (!s.running || s.consumed >= s.epoch_first_batch + s.BatchesOf(s.epoch)) return false;
    for (const Slot& ready : s.slots) s.stats.ready_sum += ready.ready;
    Slot& slot = s.slots[s.consumed % s.slots.size()];
    s.cv.Wait(s.mu, [&] {
      s.mu.AssertHeld();
      return slot.ready;
    });
    s.stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!slot.status.ok()) return slot.status;
    std::swap(*batch, slot.batch);  // the slot keeps the consumer's old buffers for reuse
    slot.ready = false;
    ++s.consumed;
    s.samples_consumed += batch->size + batch->skipped;
    ++s.stats.batches;
    s.stats.skipped_corrupt += batch->skipped;
  }
  s.cv.NotifyAll();
  return true;
}

}  // namespace granary
