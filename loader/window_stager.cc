#include "loader/window_stager.h"

#include <atomic>
#include <deque>
#include <set>
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
  struct Window {
    uint64_t key = 0;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
  };
  std::deque<Window> queue GRANARY_GUARDED_BY(mu);
  std::set<uint64_t> pending GRANARY_GUARDED_BY(mu);  // asked for, not yet staged
  bool stop GRANARY_GUARDED_BY(mu) = false;
  Status failure GRANARY_GUARDED_BY(mu);
  std::thread thread;

  void Run() GRANARY_EXCLUDES(mu) {
    for (;;) {
      Window window;
      {
        MutexLock lock(&mu);
        cv.Wait(mu, [&] {
          mu.AssertHeld();
          return stop || !queue.empty();
        });
        if (stop) return;
        window = std::move(queue.front());
        queue.pop_front();
      }
      Status s;
      for (const auto& [first, end] : window.ranges) {
        s = reader->Stage(first, end, max_staged_bytes);
        if (!s.ok()) break;
      }
      {
        MutexLock lock(&mu);
        pending.erase(window.key);
        if (!s.ok()) {
          failure = s;
          queue.clear();
          pending.clear();
          working = false;
        }
      }
      cv.NotifyAll();
      if (!s.ok()) return;
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

void WindowStager::Request(uint64_t key, std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  {
    MutexLock lock(&impl_->mu);
    if (!impl_->working || impl_->stop || !impl_->pending.insert(key).second) return;  // (asked for already)
    impl_->queue.push_back({key, std::move(ranges)});
  }
  impl_->cv.NotifyAll();
}

void WindowStager::Wait(uint64_t key) {
  MutexLock lock(&impl_->mu);
  impl_->cv.Wait(impl_->mu, [&] {
    impl_->mu.AssertHeld();
    return impl_->stop || impl_->pending.count(key) == 0;
  });
}

bool WindowStager::working() const { return impl_->working.load(std::memory_order_relaxed); }

Status WindowStager::failure() const {
  MutexLock lock(&impl_->mu);
  return impl_->failure;
}

}  // namespace granary
