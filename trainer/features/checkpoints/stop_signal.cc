#include "trainer/features/checkpoints/stop_signal.h"

#include <csignal>

namespace granary {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
int g_agreed_stop = 0;  // the training thread's

void NoteStop(int sig) {
  if (g_stop_signal != 0) {  // asked twice: ended as the signal ends a process
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop_signal = sig;
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
