#include "trainer/launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace granary {

StatusOr<int> PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::IOError("socket", "create", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return Status::IOError("127.0.0.1", "bind a free port", err);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

StatusOr<int> LaunchRanks(const std::vector<std::string>& args, int world, int port) {
  std::vector<pid_t> pids;
  auto terminate_all = [&] {
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, SIGTERM);
    }
  };
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> rank_args = args;
    rank_args.insert(rank_args.end(), {"--rank", std::to_string(rank), "--port", std::to_string(port)});
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
      int err = errno;
      terminate_all();
      return Status::IOError("fork", "start rank " + std::to_string(rank), err);
    }
    if (pid == 0) {
      std::vector<char*> argv;
      for (std::string& a : rank_args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "train: rank %d: exec failed: %s\n", rank, std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  int result = 0;
  for (size_t remaining = pids.size(); remaining > 0; --remaining) {
    int wstatus = 0;
    pid_t done = ::waitpid(-1, &wstatus, 0);
    if (done < 0) {
      if (errno == EINTR) {
        ++remaining;
        continue;
      }
      break;
    }
    for (pid_t& p : pids) {
      if (p == done) p = -1;
    }
    int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    if (code != 0 && result == 0) {
      result = code;
      terminate_all();
    }
  }
  return result;
}

}  // namespace granary
