// A mutex, its scoped lock and a condition variable carrying Clang's
// thread-safety annotations, as LevelDB's port::Mutex and GUARDED_BY do:
// state a mutex guards is declared GRANARY_GUARDED_BY(mu_), a function that
// needs it held GRANARY_REQUIRES(mu_), and `tools/thread_safety` (clang's
// -Wthread-safety, a test of the suite) checks that every access holds it.
// Other compilers see a plain std::mutex and no annotations.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GRANARY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GRANARY_THREAD_ANNOTATION(x)
#endif

#define GRANARY_CAPABILITY(x) GRANARY_THREAD_ANNOTATION(capability(x))
#define GRANARY_SCOPED_CAPABILITY GRANARY_THREAD_ANNOTATION(scoped_lockable)
#define GRANARY_GUARDED_BY(x) GRANARY_THREAD_ANNOTATION(guarded_by(x))
#define GRANARY_PT_GUARDED_BY(x) GRANARY_THREAD_ANNOTATION(pt_guarded_by(x))
#define GRANARY_REQUIRES(...) GRANARY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GRANARY_EXCLUDES(...) GRANARY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GRANARY_ACQUIRE(...) GRANARY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GRANARY_RELEASE(...) GRANARY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GRANARY_ASSERT_HELD(x) GRANARY_THREAD_ANNOTATION(assert_capability(x))

namespace granary {

class GRANARY_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() GRANARY_ACQUIRE() { mu_.lock(); }
  void Unlock() GRANARY_RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it (a callback run under the lock).
  void AssertHeld() GRANARY_ASSERT_HELD(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class GRANARY_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) GRANARY_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() GRANARY_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable, waited on with the Mutex that guards its condition
// held (always the same one). `ready` runs with it held: a lambda reading
// guarded state says so with mu.AssertHeld() (the analysis does not follow
// a lock into a lambda).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Waits until `ready()` is true.
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate ready) GRANARY_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock, ready);
    lock.release();  // still held, by the caller's scope
  }
  // The same, giving up after `timeout`; whether `ready()` became true.
  template <typename Duration, typename Predicate>
  bool WaitFor(Mutex& mu, Duration timeout, Predicate ready) GRANARY_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool met = cv_.wait_for(lock, timeout, ready);
    lock.release();
    return met;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace granary
