#include "loader/window_stager.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "base/mutex.h"

namespace granary {

struct WindowStager::Impl {
  std::unique_ptr<SplitReader> reader;
  uint64_t max_staged_bytes = 0;
  std::atomic<bool> working{true};
  mutable Mutex mu;
  CondVar cv;
  std::deque<std::pair<uint64_t, uint64_t>> queue GRANARY_GUARDED_BY(mu);
  bool stop GRANARY_GUARDED_BY(mu) = false;
  Status failure GRANARY_GUARDED_BY(mu);
  std::thread thread;

  void Run() GRANARY_EXCLUDES(mu) {
    for (;;) {
      std::pair<uint64_t, uint64_t> range;
      {
        MutexLock lock(&mu);
        cv.Wait(mu, [&] {
          mu.AssertHeld();
          return stop || !queue.empty();
        });
        if (stop) return;
        range = queue.front();
        queue.pop_front();
      }
      Status s = reader->Stage(range.first, range.second, max_staged_bytes);
      if (!s.ok()) {
        MutexLock lock(&mu);
        failure = s;
        queue.clear();
        working = false;
        return;
      }
    }
  }
};

WindowStager::WindowStager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<WindowStager>> WindowStager::Create(const DbReader& db, const std::string& split,
                                                             uint64_t max_staged_bytes) {
  auto impl = std::make_unique<Impl>();
  GRANARY_ASSIGN_OR_RETURN(impl->reader, SplitReader::Create(db, split));
  GRANARY_RETURN_IF_ERROR(impl->reader->LoadIndex());
  impl->max_staged_bytes = max_staged_bytes;
  Impl* m = impl.get();
  impl->thread = std::thread([m] { m->Run(); });
  return std::unique_ptr<WindowStager>(new WindowStager(std::move(impl)));
}

WindowStager::~WindowStager() {
  {
    MutexLock lock(&impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.NotifyAll();
  impl_->thread.join();
  impl_->reader->Unstage();
}

void WindowStager::Request(uint64_t first, uint64_t end) {
  if (!working()) return;
  {
    MutexLock lock(&impl_->mu);
    impl_->queue.emplace_back(first, end);
  }
  impl_->cv.NotifyOne();
}

bool WindowStager::working() const { return impl_->working.load(std::memory_order_relaxed); }

Status WindowStager::failure() const {
  MutexLock lock(&impl_->mu);
  return impl_->failure;
}

}  // namespace granary
