#include "trainer/launch/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace granary {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Writes all of `n` bytes to `fd`; errno of the failure, or 0.
int WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

}  // namespace

StatusOr<std::unique_ptr<OutputRelay>> OutputRelay::Create(int stdout_fd, int stderr_fd) {
  std::unique_ptr<OutputRelay> relay(new OutputRelay());
  relay->target_[0] = stdout_fd;
  relay->target_[1] = stderr_fd;
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError("pipe", "make the ranks' output pipe", errno);
    relay->read_[i] = fds[0];
    relay->write_[i] = fds[1];
  }
  return relay;
}

OutputRelay::~OutputRelay() {
  if (thread_.joinable()) Finish(0);
  for (int* fds : {read_, write_}) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) ::close(fds[i]);
    }
  }
}

void OutputRelay::Start() {
  for (int& fd : write_) {
    ::close(fd);
    fd = -1;
  }
  thread_ = std::thread([this] { Copy(); });
}

void OutputRelay::Finish(double drain_s) {
  stop_at_s_ = NowSeconds() + drain_s;
  if (thread_.joinable()) thread_.join();
}

void OutputRelay::Copy() {
  // A closed pipe as stdout is a failed write here, not a SIGPIPE that would
  // end the launcher (a signal a write raises goes to the writing thread).
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  bool open[2] = {true, true};
  char buffer[1 << 16];
  while (open[0] || open[1]) {
    pollfd fds[2] = {{read_[0], POLLIN, 0}, {read_[1], POLLIN, 0}};
    for (int i = 0; i < 2; ++i) {
      if (!open[i]) fds[i].fd = -1;
    }
    const int ready = ::poll(fds, 2, 100);
    if (ready < 0 && errno != EINTR) break;
    const double stop_at = stop_at_s_;
    if (ready <= 0) {
      if (stop_at >= 0 && NowSeconds() >= stop_at) break;
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(read_[i], buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        open[i] = false;
        continue;
      }
      if (i == 0 && stdout_error_ != 0) continue;  // stdout failed once: the rest is drained, not written
      const int err = WriteAll(target_[i], buffer, static_cast<size_t>(n));
      if (i == 0 && err != 0) stdout_error_ = err;
    }
    if (stop_at >= 0 && NowSeconds() >= stop_at) break;
  }
}

}  // namespace granary
