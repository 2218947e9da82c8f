#include "trainer/features/checkpoints/stop_signal.h"

#include <time.h>

#include <atomic>
#include <csignal>
#include <cstdint>

namespace granary {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
int g_agreed_stop = 0;  // the training thread's

// When the first stop signal came (CLOCK_MONOTONIC, ms), 0 before it.
std::atomic<int64_t> g_first_stop_ms{0};
static_assert(std::atomic<int64_t>::is_always_lock_free, "used in a signal handler");

// Within this long of the first, a stop signal is that stop arriving again
// by another way: a terminal's Ctrl-C reaches every process of its group,
// Slurm's time limit and scancel every process of the job, and the launcher
// passes the one it got on to its ranks as well.
constexpr int64_t kSameStop_ms = 1000;

void NoteStop(int sig) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t now_ms = int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
  int64_t first_ms = 0;
  if (g_first_stop_ms.compare_exchange_strong(first_ms, now_ms)) {
    g_stop_signal = sig;
    return;
  }
  if (now_ms - first_ms < kSameStop_ms) return;
  std::signal(sig, SIG_DFL);  // asked again: ended as the signal ends a process
  std::raise(sig);
}

}  // namespace

void CatchStopSignals() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_handler = NoteStop;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a read or write the signal lands in goes on
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(sig, &action, nullptr);
    return true;
  }();
  (void)installed;
}

int StopSignal() { return g_stop_signal; }

void SetAgreedStop(int sig) { g_agreed_stop = sig; }

int AgreedStop() { return g_agreed_stop; }

}  // namespace granary
