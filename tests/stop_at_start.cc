// A rank stopped during start-up, for tests: preloaded (LD_PRELOAD), it makes
// the process whose command line holds "--rank N", N the value of
// GRANARY_TEST_STOP_RANK, stop itself (SIGSTOP) before main runs.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace {

__attribute__((constructor)) void StopAtStart() {
  const char* rank = std::getenv("GRANARY_TEST_STOP_RANK");
  if (rank == nullptr) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (line.find(std::string("--rank") + '\0' + rank + '\0') != std::string::npos) std::raise(SIGSTOP);
}

}  // namespace
