#include "trainer/features/checkpoints/stop_signal.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <string>

#include "base/file.h"

namespace granary {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};

volatile std::sig_atomic_t g_stop_signal = 0;
int g_agreed_stop = 0;  // the training thread's

// Who sent the first stop signal (its pid; 0: the kernel, for a terminal's
// Ctrl-C), or -1 before it.
std::atomic<int> g_first_sender{-1};
static_assert(std::atomic<int>::is_always_lock_free, "used in a signal handler");

// A stop signal from another sender than the first is that stop come by
// another way: a terminal's Ctrl-C reaches every process of its group,
// Slurm's time limit and scancel every process of the job, and the launcher
// passes the one it got on to its ranks as well. One from the same sender
// again is a user who insists: the process ends at once.
void NoteStop(int sig, siginfo_t* info, void*) {
  const int sender = info != nullptr && info->si_code != SI_KERNEL ? static_cast<int>(info->si_pid) : 0;
  int first = -1;
  if (g_first_sender.compare_exchange_strong(first, sender)) {
    g_stop_signal = sig;
    return;
  }
  if (sender != first) return;
  std::signal(sig, SIG_DFL);  // asked again: ended as the signal ends a process
  std::raise(sig);
}

// "train: stopped by SIGTERM", where each line below starts.
std::string StoppedBy(int sig) {
  const char* name = ::sigabbrev_np(sig);
  return std::string("train: stopped by SIG") + (name ? name : "?");
}

}  // namespace

void CatchStopSignals() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_sigaction = NoteStop;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_SIGINFO;  // a read or write the signal lands in goes on
    for (int sig : kStopSignals) ::sigaction(sig, &action, nullptr);
    return true;
  }();
  (void)installed;
}

std::string NothingKeptLine(int sig) {
  return StoppedBy(sig) + "; nothing of the run was kept (with --checkpoint-dir DIR a stop saves the step it "
                          "reached, and --resume latest goes on from it)\n";
}

std::string SavedLine(int sig, const std::string& saved) {
  return StoppedBy(sig) + "; the step it reached is saved in " + saved + ": add --resume latest to go on from it\n";
}

std::string NotSavedLine(int sig, const std::string& newest) {
  return StoppedBy(sig) + " before its ranks saved the step they reached" +
         (newest.empty() ? std::string() : "; the newest checkpoint is still " + newest) + "\n";
}

void SayStopsEndTheRun() {
  static std::array<std::string, NSIG> lines;  // written before the handlers are installed, read by them
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_handler = [](int sig) {
      const std::string& line = lines[static_cast<size_t>(sig)];
      RemoveTemporaryFilesNow();  // a --save or --report being written
      (void)!::write(STDERR_FILENO, line.data(), line.size());
      ::_exit(128 + sig);
    };
    sigemptyset(&action.sa_mask);
    for (int sig : kStopSignals) sigaddset(&action.sa_mask, sig);  // one line, whichever came first
    for (int sig : kStopSignals) {
      lines[static_cast<size_t>(sig)] = NothingKeptLine(sig);
      ::sigaction(sig, &action, nullptr);
    }
    return true;
  }();
  (void)installed;
}

int StopSignal() { return g_stop_signal; }

void SetAgreedStop(int sig) { g_agreed_stop = sig; }

int AgreedStop() { return g_agreed_stop; }

}  // namespace granary
