// StagedSpans: the spans of one split's shard files read ahead with direct
// I/O (SplitReader::Stage), shared by every reader of the split on a
// DbReader (store-internal). Thread-safe. It must outlive the spans it hands
// out (a DbReader's readers do not outlive it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/file.h"
#include "base/mutex.h"

namespace granary {

class StagedSpans {
 public:
  struct Span {
    size_t shard = 0;
    DirectRead read;
  };

  StagedSpans() = default;
  ~StagedSpans();
  StagedSpans(const StagedSpans&) = delete;
  StagedSpans& operator=(const StagedSpans&) = delete;

  // A span to read into. Its buffer comes back as a spare for the next one
  // once no one holds the span (mapping and unmapping buffers costs every
  // core a TLB flush), or goes back to the system after Clear.
  std::shared_ptr<Span> NewSpan();
  // Adds `span` (read; null: nothing), then drops the oldest spans until at
  // most `max_bytes` are held. A reader holding a dropped span keeps it.
  void Add(std::shared_ptr<Span> span, uint64_t max_bytes);
  // The span holding file bytes [offset, offset + bytes) of `shard`, or null.
  std::shared_ptr<const Span> Find(size_t shard, uint64_t offset, size_t bytes) const;
  // Drops every span and spare.
  void Clear();

 private:
  static constexpr size_t kMaxSpare = 8;
  mutable Mutex mu_;
  std::deque<std::shared_ptr<const Span>> spans_ GRANARY_GUARDED_BY(mu_);  // oldest first
  uint64_t bytes_ GRANARY_GUARDED_BY(mu_) = 0;
  bool open_ GRANARY_GUARDED_BY(mu_) = false;  // between the first Add and Clear: spares are kept
  std::vector<std::unique_ptr<Span>> spare_ GRANARY_GUARDED_BY(mu_);
  // Whether any span is held: Find skips the lock when none is.
  std::atomic<bool> any_{false};
};

}  // namespace granary
