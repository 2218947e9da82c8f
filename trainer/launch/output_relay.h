// Carries a child's stdout and stderr through pipes to where the launcher's
// own go, on a thread of its own. Under mpirun the ranks write to mpirun,
// which writes to the launcher's stdout and drops a failed write without a
// word (a full disk, a closed pipe): through the relay the launcher sees the
// failure and the run does not exit 0 with its output lost. Made, started
// and finished by one thread (the launcher's); its own thread only copies.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace granary {

// What mpirun writes on stderr, told apart from the ranks' own lines: each
// of OpenMPI's boxed messages ("-----" lines around a paragraph) that says
// what went wrong becomes one line, "train: OpenMPI: <its first sentence>
// (Key: value; ...)", once however many ranks send it, the first three
// only; the rest of OpenMPI's talk (the boxes that
// repeat what the launcher says itself, its "[host:pid] ..." lines: abort
// notices, help counts, ORTE_ERROR_LOG; "Forwarding signal N to job";
// shared memory's "Read -1, expected N" after a stop) is dropped; every
// other line passes as it came.
class MpirunStderrFilter {
 public:
  // The lines of `bytes` to write on (possibly none), whole lines only.
  std::string Feed(const char* bytes, size_t n);
  // What is left at the end (a last line without its newline).
  std::string Finish();
  // Whether OpenMPI has said what went wrong (a box was summarised).
  bool Told() const { return !told_.empty(); }

 private:
  std::string Line(const std::string& line);  // what one whole line becomes
  std::string pending_;             // bytes of a line not yet ended
  bool in_box_ = false;
  bool after_own_line_ = false;    // the last line was OpenMPI's own, dropped
  static constexpr size_t kMostBoxes = 3;
  static constexpr size_t kLongestLine = size_t{1} << 16;
  std::vector<std::string> told_;   // the first lines of the boxes summarised
  std::vector<std::string> box_;    // the lines of the box being read
};

class OutputRelay {
 public:
  // Pipes whose reading ends are copied to `stdout_fd` and `stderr_fd`;
  // `mpirun`: stderr is mpirun's, passed through MpirunStderrFilter;
  // `prefix`: both are copied in whole lines (a line ends at '\n' or '\r',
  // as a progress bar's do), each after `prefix` (e.g. "[rank 1] ", or "").
  static StatusOr<std::unique_ptr<OutputRelay>> Create(int stdout_fd, int stderr_fd, bool mpirun = false,
                                                       std::optional<std::string> prefix = std::nullopt);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // The writing ends, for the child to dup2 onto its fd 1 and 2 (they close
  // on exec themselves; dup2's copies do not).
  int child_stdout() const { return write_[0]; }
  int child_stderr() const { return write_[1]; }

  // After the fork: closes the writing ends here and starts copying.
  void Start();
  // Copies what is left until every writer has closed its end, for at most
  // `drain_s` (a process the child left behind may hold one), then stops.
  void Finish(double drain_s);
  // errno of the first write to the stdout target that failed, or 0. Read
  // after Finish.
  int stdout_error() const { return stdout_error_; }
  // Whether OpenMPI said what went wrong on the stderr it relayed. After Finish.
  bool openmpi_told() const { return filter_ && filter_->Told(); }

 private:
  OutputRelay() = default;
  void Copy();

  int read_[2] = {-1, -1};   // stdout, stderr pipes' reading ends
  int write_[2] = {-1, -1};  // their writing ends, until Start
  int target_[2] = {-1, -1};
  int stdout_error_ = 0;
  std::unique_ptr<MpirunStderrFilter> filter_;  // set for mpirun's stderr
  std::optional<std::string> prefix_;  // set: copied in whole lines
  std::string pending_[2];  // in whole lines: a line not yet ended, per pipe
  // In whole lines: `n` bytes read from pipe `i` as the whole lines to write.
  std::string Prefixed(int i, const char* bytes, size_t n);
  std::atomic<double> stop_at_s_{-1};  // on the steady clock, set by Finish; -1: copy until end of file
  std::thread thread_;
};

}  // namespace granary
