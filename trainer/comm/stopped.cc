#include "trainer/comm/stopped.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace granary {
namespace {

int64_t MonotonicMs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
}

// When this process last went on after being stopped, CLOCK_MONOTONIC ms;
// 0: never.
std::atomic<int64_t> g_continued_ms{0};
static_assert(std::atomic<int64_t>::is_always_lock_free, "set in a signal handler");

// Whether NoteContinues installed its handler.
std::atomic<bool> g_noting{false};

// The kernel hands a SIGCONT to one thread of the process, which may not have
// run its handler yet when another thread finds its wait timed out: on a busy
// machine it waits for a CPU with the signal still pending, or taken and its
// handler about to run.
bool ContinuePending() {
  sigset_t pending;
  return ::sigpending(&pending) == 0 && ::sigismember(&pending, SIGCONT) == 1;
}

// When this process went on from a stop at most `window_ms` before `now`,
// CLOCK_MONOTONIC ms; 0: not. The first call waits up to half a second for a
// handler about to run (once: a run that timed out for another reason ends
// that much later, not more).
int64_t RecentContinue(int64_t now, int64_t window_ms) {
  static std::atomic<bool> waited{false};
  const bool wait = g_noting && !waited.exchange(true);
  for (int slept_ms = 0;; slept_ms += 10) {
    if (ContinuePending()) return now;
    const int64_t continued = g_continued_ms.load();
    if (continued != 0 && now - continued <= window_ms) return continued;
    if (!wait || slept_ms >= 500) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool IsTimeout(const std::string& m) {
  return m.find("imeout") != std::string::npos || m.find("imed out") != std::string::npos;
}

}  // namespace

void NoteContinues() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_handler = [](int) { g_continued_ms = MonotonicMs(); };
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return ::sigaction(SIGCONT, &action, nullptr) == 0;
  }();
  g_noting = installed;
}

Status ExplainStopped(Status s, int timeout_s) {
  if (s.ok() || !IsTimeout(s.message())) return s;
  const int64_t now = MonotonicMs();
  const int64_t continued = RecentContinue(now, int64_t{timeout_s + 10} * 1000);
  if (continued == 0) return s;
  const int64_t ago_s = std::max<int64_t>(now - continued, 0) / 1000;
  const std::string went_on = ago_s < 1 ? "has just gone on" : "went on " + std::to_string(ago_s) + " s ago";
  return Status::FailedPrecondition(s.message() + ": this process was stopped (Ctrl-Z, SIGSTOP, a suspended job) and " +
                                    went_on + ", and a stop longer than --timeout " + std::to_string(timeout_s) +
                                    " s ends the run's collectives: go on from its last checkpoint (--resume "
                                    "latest), or give a larger --timeout");
}

}  // namespace granary
