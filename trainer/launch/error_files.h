// torchrun's error files (TORCHELASTIC_ERROR_FILE): a script whose entry
// point is decorated with torch.distributed.elastic's @record writes there,
// as JSON, the exception that ended its rank; the launcher names it in its
// line on that rank's failure, where the root cause would otherwise lie
// among every rank's tracebacks. One anonymous file (memfd) per rank, held
// by the launcher alone (close-on-exec) and opened by the rank through
// /proc/<launcher>/fd/N: nothing is left behind however the launcher ends.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace granary {

class RankErrorFiles {
 public:
  static StatusOr<RankErrorFiles> Create(int ranks);
  RankErrorFiles(RankErrorFiles&& other) noexcept;
  RankErrorFiles& operator=(RankErrorFiles&&) = delete;
  RankErrorFiles(const RankErrorFiles&) = delete;
  ~RankErrorFiles();

  // "TORCHELASTIC_ERROR_FILE=/proc/<this process>/fd/N" for local rank `rank`.
  std::string Environment(int rank) const;
  // What the rank recorded ("ValueError: bad batch"): the first line of its
  // message, printable characters only, at most kMaxMessageBytes; "" if it
  // recorded nothing (or not as torch does).
  std::string Message(int rank) const;

  static constexpr size_t kMaxMessageBytes = 300;

 private:
  explicit RankErrorFiles(std::vector<int> fds) : fds_(std::move(fds)) {}
  std::vector<int> fds_;
};

// What a script written for GPUs should change to run on CPUs, from the
// error a rank recorded (`message`: NCCL asked for, a tensor put on CUDA,
// device_ids given to DistributedDataParallel); "" for any other error.
std::string CpuAdvice(const std::string& message);

// The lines of Python script `script` that put work on GPUs (torch.cuda,
// .cuda(), "cuda:0", NCCL, device_ids, .to(local_rank)), which on CPUs
// fail one run at a time: "train.py:14 torch.cuda.set_device(rank), :15
// ...", at most kMaxGpuLines of them; "" where it has none (or cannot be
// read). A line that asks torch.cuda.is_available() chooses, and is not one.
std::string GpuLines(const std::string& script);
inline constexpr int kMaxGpuLines = 8;

// Where `message` says rank `rank` (global) could not serve a store on
// `master_port` (its MASTER_PORT) as the address was in use: two ranks took
// rank 0, the script passing rank= of its own to init_process_group (or,
// for rank 0, another program holds the port); that, as advice. "" for any
// other error.
std::string RendezvousAdvice(const std::string& message, int rank, const std::string& master_port);

// Where `message` is Python's "ModuleNotFoundError: No module named 'X'"
// and `python` (the program that ran the script) is not the only python3
// on `path` (a PATH; /usr/bin/python3 too): those that have X, as advice
// ("the python3 that ran it (/root/.pyenv/shims/python3) has no module
// 'torch'; /usr/bin/python3 has it: ..."); "" otherwise. Each is asked
// (importlib's find_spec, nothing imported) for at most a few seconds.
std::string MissingModuleAdvice(const std::string& message, const std::string& python, const std::string& path);

// The message in an error file's text (RankErrorFiles::Message), "" if none.
std::string RecordedErrorMessage(const std::string& text);

}  // namespace granary
