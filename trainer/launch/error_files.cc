#include "trainer/launch/error_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace granary {
namespace {

// More than a long traceback; what lies past it is not read.
constexpr size_t kMaxErrorFileBytes = size_t{1} << 20;

}  // namespace

StatusOr<RankErrorFiles> RankErrorFiles::Create(int ranks) {
  std::vector<int> fds;
  for (int r = 0; r < ranks; ++r) {
    const int fd = ::memfd_create("granary-error-file", MFD_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      for (int open : fds) ::close(open);
      return Status::IOError("memfd", "create rank " + std::to_string(r) + "'s error file", err);
    }
    fds.push_back(fd);
  }
  return RankErrorFiles(std::move(fds));
}

RankErrorFiles::RankErrorFiles(RankErrorFiles&& other) noexcept : fds_(std::move(other.fds_)) { other.fds_.clear(); }

RankErrorFiles::~RankErrorFiles() {
  for (int fd : fds_) ::close(fd);
}

std::string RankErrorFiles::Environment(int rank) const {
  return "TORCHELASTIC_ERROR_FILE=/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fds_.at(rank));
}

std::string RankErrorFiles::Message(int rank) const {
  std::string text(kMaxErrorFileBytes, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fds_.at(rank), text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return RecordedErrorMessage(text);
}

std::string CpuAdvice(const std::string& message) {
  const auto has = [&](const char* words) { return message.find(words) != std::string::npos; };
  if (has("NCCL")) return "NCCL needs GPUs: dist.init_process_group(\"gloo\") runs on CPUs";
  // torch.cuda.set_device(local_rank), the DDP tutorial's first line, on a torch built without CUDA.
  if (has("torch._C' has no attribute '_cuda")) {
    return "the script calls torch.cuda (set_device(LOCAL_RANK) picks a rank's GPU), and this torch runs on CPUs: "
           "leave the call out, and put the model and tensors on torch.device(\"cpu\")";
  }
  if (has("not compiled with CUDA") || has("NVIDIA driver") || has("CUDA is not available") ||
      has("CUDA driver")) {
    return "the script puts its model or tensors on CUDA, and this torch runs on CPUs: use torch.device(\"cpu\") "
           "(or \"cuda\" if torch.cuda.is_available() else \"cpu\")";
  }
  if (has("DistributedDataParallel") && has("device_ids")) {
    return "on CPUs DistributedDataParallel takes no device_ids: DistributedDataParallel(model)";
  }
  return "";
}

std::string GpuLines(const std::string& script) {
  std::ifstream in(script);
  static const std::regex kGpu(R"(torch\.cuda\.|\.cuda\(|["']cuda|nccl|NCCL|device_ids|)"
                               R"(\.to\(\s*(self\.)?(args\.)?(gpu\w*|\w*rank|device_id)\s*[,)])");
  std::string out, line;
  int found = 0;
  for (int number = 1; found < kMaxGpuLines && std::getline(in, line) && number <= 100000; ++number) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#' || line.find("is_available") != std::string::npos) continue;
    if (!std::regex_search(line, kGpu)) continue;
    std::string text = line.substr(start, 72);
    if (text.size() < line.size() - start) text += "...";
    out += (found++ == 0 ? script : std::string()) + ":" + std::to_string(number) + " " + text + ", ";
  }
  return out.empty() ? out : out.substr(0, out.size() - 2);
}

std::string RendezvousAdvice(const std::string& message, int rank, const std::string& master_port) {
  if (master_port.empty() || message.find("Address already in use") == std::string::npos ||
      message.find(":" + master_port + " ") == std::string::npos) {
    return "";
  }
  const std::string own_rank = "the script passes rank= of its own to init_process_group (argparse's default?); "
                               "leave it out (env:// reads RANK, which launch sets), or pass int(os.environ['RANK'])";
  if (rank != 0) {
    return "it served the rendezvous on MASTER_PORT " + master_port + ", as rank 0 alone does, so two ranks took "
           "rank 0: " + own_rank;
  }
  return "MASTER_PORT " + master_port + " was taken when rank 0 served the rendezvous there: by another rank that "
         "took rank 0 too (" + own_rank + "), or by another program (--master-port to choose another port)";
}

namespace {

// Whether `python` finds top-level module `module`, asked for at most
// kProbe_s (a python that hangs or is no python: no).
bool PythonHasModule(const std::string& python, const std::string& module) {
  constexpr double kProbe_s = 10;
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd : {0, 1, 2}) ::dup2(null, fd);
    ::execl(python.c_str(), python.c_str(), "-c",
            "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)", module.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kProbe_s);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

std::string MissingModuleAdvice(const std::string& message, const std::string& python, const std::string& path) {
  const std::string prefix = "ModuleNotFoundError: No module named '";
  const size_t at = message.find(prefix);
  if (at == std::string::npos || python.find("python") == std::string::npos) return "";
  const size_t start = at + prefix.size(), end = message.find_first_of(".'", start);
  if (end == std::string::npos || end == start) return "";
  const std::string module = message.substr(start, end - start);
  // Told apart by their folders' real paths (/bin is /usr/bin on most
  // systems), not their own: a venv's python3 is a link to the system's,
  // yet another interpreter (its own site-packages).
  const auto where = [](const std::string& file) {
    std::error_code ec;
    const std::filesystem::path p(file);
    return (std::filesystem::weakly_canonical(p.parent_path(), ec) / p.filename()).string();
  };
  std::vector<std::string> seen = {where(python)};
  const std::string dirs = path + ":/usr/bin";
  for (size_t from = 0; from <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', from), dirs.size());
    const std::string candidate = dirs.substr(from, colon - from) + "/python3";
    from = colon + 1;
    const std::string real = where(candidate);
    if (::access(candidate.c_str(), X_OK) != 0 || std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
    seen.push_back(real);
    if (seen.size() > 6 || !PythonHasModule(candidate, module)) continue;
    return "the python3 that ran it (" + python + ") has no module '" + module + "'; " + candidate +
           " has it: name it as COMMAND (launch ... " + candidate + " SCRIPT.py)";
  }
  return "";
}

std::string RecordedErrorMessage(const std::string& text) {
  const nlohmann::json j = ParseJson(text);
  if (!j.is_object() || !j.contains("message")) return "";
  // torch 1.13 writes {"message": {"message": "ValueError: ...", "extraInfo": {...}}}; a plain string is taken too.
  const nlohmann::json* m = &j["message"];
  if (m->is_object() && m->contains("message")) m = &(*m)["message"];
  if (!m->is_string()) return "";
  std::string line;
  for (char c : m->get<std::string>()) {
    if (c == '\n') break;
    if (line.size() == RankErrorFiles::kMaxMessageBytes) {
      while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) line.pop_back();
      if (!line.empty() && static_cast<unsigned char>(line.back()) >= 0xC0) line.pop_back();  // a cut character
      return line + "...";
    }
    const auto u = static_cast<unsigned char>(c);
    line.push_back(u < 0x20 || u == 0x7f ? '?' : c);
  }
  return line;
}

}  // namespace granary
