#include "trainer/launch/error_files.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

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
