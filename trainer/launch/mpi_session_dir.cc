#include "trainer/launch/mpi_session_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace granary {
namespace {

constexpr const char* kSessionRoot = "/dev/shm";
constexpr const char* kSessionPrefix = "granary-mpi.";

void RemoveTree(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::remove_all(p, ec);  // best effort: a file still mapped is unlinked all the same
}

}  // namespace

MpiSessionDir::~MpiSessionDir() {
  if (!path_.empty()) RemoveTree(path_);
}

void MpiSessionDir::Create() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kSessionRoot, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kSessionPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::strlen(kSessionPrefix), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) RemoveTree(entry.path());
  }
  const std::string path = std::string(kSessionRoot) + "/" + kSessionPrefix + std::to_string(::getpid());
  if (::mkdir(path.c_str(), 0700) == 0) path_ = path;
}

}  // namespace granary
