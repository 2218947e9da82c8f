// A slow disk, for tests: preloaded (LD_PRELOAD), it makes fsync and
// fdatasync sleep GRANARY_TEST_FSYNC_DELAY_MS milliseconds first.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace {

void Delay() {
  const char* ms = std::getenv("GRANARY_TEST_FSYNC_DELAY_MS");
  if (ms != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

template <typename F>
F Real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto real = Real<int (*)(int)>("fsync");
  Delay();
  return real(fd);
}

extern "C" int fdatasync(int fd) {
  static const auto real = Real<int (*)(int)>("fdatasync");
  Delay();
  return real(fd);
}
