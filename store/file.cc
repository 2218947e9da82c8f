#include "store/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>

namespace granary {

Status ReadFile(const std::string& path, std::string* out) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IOError(path, "open", errno);
  }
  out->clear();
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f.get())) > 0;) out->append(buf, n);
  if (std::ferror(f.get())) return Status::IOError(path, "read", errno);
  return Status::OK();
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Status ReadOnlyFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, "open", errno);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = path;
  return Status::OK();
}

Status ReadOnlyFile::ReadAt(uint64_t offset, size_t bytes, char* dst) const {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, dst + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(path_, "read " + std::to_string(bytes) + " bytes at " + std::to_string(offset), errno);
    }
    if (n == 0) {
      return Status::Corruption(path_ + ": ends before byte " + std::to_string(offset + bytes) +
                                " (a read of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) + ")");
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

void ReadOnlyFile::WillNeed(uint64_t offset, size_t bytes) const {
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

}  // namespace granary
