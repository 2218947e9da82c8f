#include "trainer/launch/mpi_session_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
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

Status CheckMpiSharedMemory(const std::string& dir, int local_ranks, const Environment& env) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return Status::OK();  // OpenMPI will say what it finds
  const double mib = 1 << 20;
  const double segment = env.Number("OMPI_MCA_btl_vader_segment_size") > 0
                             ? env.Number("OMPI_MCA_btl_vader_segment_size")
                             : 4 * mib;  // OpenMPI 4.1's default
  const double needed = local_ranks * (segment + mib / 16) + 5 * mib;  // PMIx's store: 2 x 4 MiB, part used
  const double free = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (free >= needed) return Status::OK();
  char text[320];
  std::snprintf(text, sizeof(text),
                "--backend mpi: %s has %.1f MiB free, and OpenMPI's shared memory for %d rank%s on this machine "
                "takes about %.0f MiB (a %.0f MiB segment each): give it more (a container's /dev/shm is 64 MiB "
                "unless docker run --shm-size says more, e.g. --shm-size 1g), or use --backend gloo",
                dir.c_str(), free / mib, local_ranks, local_ranks == 1 ? "" : "s", std::ceil(needed / mib),
                segment / mib);
  return Status::FailedPrecondition(text);
}

Status MpiSessionDir::Create(int ranks, const Environment& env) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kSessionRoot, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kSessionPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::strlen(kSessionPrefix), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) RemoveTree(entry.path());
  }
  const std::string path = std::string(kSessionRoot) + "/" + kSessionPrefix + std::to_string(::getpid());
  if (::mkdir(path.c_str(), 0700) == 0) path_ = path;
  return CheckMpiSharedMemory(kSessionRoot, ranks, env);
}

}  // namespace granary
