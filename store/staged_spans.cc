#include "store/staged_spans.h"

#include <utility>

namespace granary {

// Spans are dropped outside mu_ throughout: their deleter takes it.

StagedSpans::~StagedSpans() { Clear(); }

std::shared_ptr<StagedSpans::Span> StagedSpans::NewSpan() {
  std::unique_ptr<Span> span;
  {
    MutexLock lock(&mu_);
    if (!spare_.empty()) {
      span = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  if (span == nullptr) span = std::make_unique<Span>();
  return std::shared_ptr<Span>(span.release(), [this](Span* done) {
    std::unique_ptr<Span> owned(done);
    MutexLock lock(&mu_);
    if (open_ && spare_.size() < kMaxSpare) spare_.push_back(std::move(owned));
  });
}

void StagedSpans::Add(std::shared_ptr<Span> span, uint64_t max_bytes) {
  std::vector<std::shared_ptr<const Span>> dropped;
  MutexLock lock(&mu_);
  if (span != nullptr) {
    open_ = true;
    bytes_ += span->read.size();
    spans_.push_back(std::move(span));
    any_ = true;
  }
  while (bytes_ > max_bytes && !spans_.empty()) {
    bytes_ -= spans_.front()->read.size();
    dropped.push_back(std::move(spans_.front()));
    spans_.pop_front();
  }
}

std::shared_ptr<const StagedSpans::Span> StagedSpans::Find(size_t shard, uint64_t offset, size_t bytes) const {
  if (!any_.load(std::memory_order_relaxed)) return nullptr;
  MutexLock lock(&mu_);
  for (auto it = spans_.rbegin(); it != spans_.rend(); ++it) {  // the newest are read soonest
    if ((*it)->shard == shard && (*it)->read.Holds(offset, bytes)) return *it;
  }
  return nullptr;
}

void StagedSpans::Clear() {
  std::deque<std::shared_ptr<const Span>> dropped;
  std::vector<std::unique_ptr<Span>> spare;
  MutexLock lock(&mu_);
  open_ = false;
  any_ = false;
  bytes_ = 0;
  std::swap(dropped, spans_);
  std::swap(spare, spare_);
}

}  // namespace granary
