#include "trainer/launch/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include "base/file.h"

namespace granary {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A line of OpenMPI's boxes: dashes only.
bool IsBoxEdge(const std::string& line) {
  return line.size() >= 20 && line.find_first_not_of('-') == std::string::npos;
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// "Host:      vm" and the like: a key, a colon, a value.
bool IsKeyValue(const std::string& line) {
  const size_t colon = line.find(':');
  return colon != std::string::npos && colon > 0 && colon < 24 && line[0] != ' ' &&
         line.find_first_not_of(' ', colon + 1) != std::string::npos && line.find(". ") == std::string::npos;
}

}  // namespace

std::string MpirunStderrFilter::Feed(const char* bytes, size_t n) {
  pending_.append(bytes, n);
  std::string out;
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    out += Line(pending_.substr(start, end - start));
  }
  pending_.erase(0, start);
  if (pending_.size() > kLongestLine) {  // output that never ends a line passes anyway
    out += pending_;
    pending_.clear();
  }
  return out;
}

std::string MpirunStderrFilter::Finish() {
  std::string out = pending_.empty() ? "" : Line(pending_);
  pending_.clear();
  return out;
}

std::string MpirunStderrFilter::Line(const std::string& line) {
  if (IsBoxEdge(line)) {
    if (!in_box_) {
      in_box_ = true;
      box_.clear();
      return "";
    }
    in_box_ = false;
    // Not summed up: boxes that repeat what the launcher says itself (mpirun
    // reporting how its ranks ended: "mpirun noticed that process rank 1 ...
    // exited on signal 15"), one already told, and any past kMostBoxes.
    if (box_.empty() || told_.size() >= kMostBoxes || StartsWith(box_[0], "Primary job") ||
        StartsWith(box_[0], "mpirun ") || StartsWith(box_[0], "mpiexec ") ||
        std::find(told_.begin(), told_.end(), box_[0]) != told_.end()) {  // the same box from another rank
      return "";
    }
    told_.push_back(box_[0]);
    std::string sentence, details;
    for (const std::string& l : box_) {
      if (l.find_first_not_of(' ') == std::string::npos) {
        if (!sentence.empty()) break;
        continue;
      }
      sentence += (sentence.empty() ? "" : " ") + l.substr(l.find_first_not_of(' '));
    }
    const size_t stop = sentence.find(". ");
    if (stop != std::string::npos) sentence.resize(stop + 1);
    for (const std::string& l : box_) {
      if (IsKeyValue(l)) {
        const size_t colon = l.find(':');
        details += (details.empty() ? "" : "; ") + l.substr(0, colon + 1) + " " +
                   l.substr(l.find_first_not_of(' ', colon + 1));
      }
    }
    return "train: OpenMPI: " + sentence + (details.empty() ? "" : " (" + details + ")") + "\n";
  }
  if (in_box_) {
    box_.push_back(line);
    return "";
  }
  // OpenMPI's own lines start "[host:pid]" (abort notices, help counts, ORTE_ERROR_LOG); the ranks' never do.
  // mpirun's own, to a second signal while it aborts, ends in an empty line.
  const bool after_own_line = std::exchange(after_own_line_, false);
  if (after_own_line && line.empty()) return "";
  const size_t close = line.find("] ");
  if ((StartsWith(line, "[") && close != std::string::npos && line.find(':') < close) ||
      line.find("Set MCA parameter \"orte_base_help_aggregate\"") != std::string::npos ||
      ((StartsWith(line, "mpiexec: ") || StartsWith(line, "mpirun: ")) &&
       (line.find("Forwarding signal") != std::string::npos ||
        line.find("abort is already in progress") != std::string::npos)) ||
      line.find("Read -1, expected") != std::string::npos) {
    after_own_line_ = true;
    return "";
  }
  return line + "\n";
}

StatusOr<std::unique_ptr<OutputRelay>> OutputRelay::Create(int stdout_fd, int stderr_fd, bool mpirun,
                                                           std::optional<std::string> prefix) {
  std::unique_ptr<OutputRelay> relay(new OutputRelay());
  if (mpirun) relay->filter_ = std::make_unique<MpirunStderrFilter>();
  relay->prefix_ = std::move(prefix);
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
      if (prefix_) {
        const std::string lines = Prefixed(i, buffer, static_cast<size_t>(n));
        const int err = WriteAll(target_[i], lines.data(), lines.size());
        if (i == 0 && err != 0) stdout_error_ = err;
        continue;
      }
      if (i == 1 && filter_) {
        const std::string lines = filter_->Feed(buffer, static_cast<size_t>(n));
        (void)WriteAll(target_[1], lines.data(), lines.size());
        continue;
      }
      const int err = WriteAll(target_[i], buffer, static_cast<size_t>(n));
      if (i == 0 && err != 0) stdout_error_ = err;
    }
    if (stop_at >= 0 && NowSeconds() >= stop_at) break;
  }
  if (filter_) {
    const std::string rest = filter_->Finish();
    (void)WriteAll(target_[1], rest.data(), rest.size());
  }
  for (int i = 0; i < 2; ++i) {  // a last line without its newline
    if (pending_[i].empty() || (i == 0 && stdout_error_ != 0)) continue;
    const std::string rest = *prefix_ + pending_[i] + "\n";
    const int err = WriteAll(target_[i], rest.data(), rest.size());
    if (i == 0 && err != 0) stdout_error_ = err;
  }
}

std::string OutputRelay::Prefixed(int i, const char* bytes, size_t n) {
  std::string& pending = pending_[i];
  pending.append(bytes, n);
  std::string lines;
  size_t start = 0;
  for (size_t end; (end = pending.find_first_of("\n\r", start)) != std::string::npos; start = end + 1) {
    lines += *prefix_;
    lines.append(pending, start, end + 1 - start);
  }
  pending.erase(0, start);
  if (pending.size() > (size_t{1} << 16)) {  // a line without end: passed on in pieces
    lines += *prefix_ + pending + "\n";
    pending.clear();
  }
  return lines;
}

}  // namespace granary
