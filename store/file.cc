#include "store/file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

namespace granary {

const char* FileTypeName(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

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

Status ReadBoundedFile(const std::string& path, uint64_t max_bytes, std::string* out) {
  ReadOnlyFile file;
  if (Status opened = file.Open(path); !opened.ok()) {
    if (errno == ENOENT && opened.code() == Status::Code::kIOError) return Status::NotFound(path + ": no such file");
    return opened;
  }
  if (file.size_bytes() > max_bytes) {
    return Status::Corruption(path + ": is " + std::to_string(file.size_bytes()) + " bytes, more than the " +
                              std::to_string(max_bytes) + " it may have");
  }
  out->resize(file.size_bytes());
  return file.ReadAt(0, out->size(), out->data());
}

namespace {

// Writes `contents` to `path`, fsynced when `sync`.
Status WriteWholeFile(const std::string& path, const std::string& contents, bool sync) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IOError(path, "create", errno);
  size_t n = std::fwrite(contents.data(), 1, contents.size(), f);
  int err = errno;
  if (n != contents.size()) {
    std::fclose(f);
    return Status::IOError(path, "write", err);
  }
  if (std::fflush(f) != 0 || (sync && ::fsync(fileno(f)) != 0)) {
    err = errno;
    std::fclose(f);
    return Status::IOError(path, "flush", err);
  }
  if (std::fclose(f) != 0) return Status::IOError(path, "close", errno);
  return Status::OK();
}

}  // namespace

Status WriteFileSynced(const std::string& path, const std::string& contents) {
  return WriteWholeFile(path, contents, /*sync=*/true);
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::string target = path;  // a symlink is written through: the link stays, what it names is replaced
  struct stat link;
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return Status::IOError(path, "resolve the symlink", errno);
    target = real;
    std::free(real);
  }
  const std::string tmp = target + ".tmp";
  Status written = WriteWholeFile(tmp, contents, /*sync=*/false);
  if (written.ok() && std::rename(tmp.c_str(), target.c_str()) != 0) {
    written = Status::IOError(target, "rename from " + tmp, errno);
  }
  if (!written.ok()) ::unlink(tmp.c_str());  // no half-written file left behind
  return written;
}

Status FlushStdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) return Status::IOError("stdout", "write", errno);
  return Status::OK();
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path, "open for fsync", errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::IOError(path, "fsync", err);
  return Status::OK();
}

void RaiseOpenFileLimit() {
  rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);  // best effort: opening shards reports EMFILE otherwise
  }
}

DirectoryLock::~DirectoryLock() { Release(); }

void DirectoryLock::Release() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the flock
  fd_ = -1;
}

Status DirectoryLock::TryLock(const std::string& path) {
  Release();
  // A few attempts: each fails only if the directory was renamed or replaced
  // between our open and our lock, i.e. while its holder was finishing.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::IOError(path, "open to lock", errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return Status::Busy(path + ": locked by another process");
      return Status::IOError(path, "lock", err);
    }
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      fd_ = fd;
      return Status::OK();
    }
    ::close(fd);
  }
  return Status::Busy(path + ": replaced repeatedly while being locked");
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_bytes_(other.size_bytes_) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_bytes_ = other.size_bytes_;
  }
  return *this;
}

Status ReadOnlyFile::Open(const std::string& path) {
  // Non-blocking: opening a FIFO would otherwise wait for a writer for ever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::IOError(path, "open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(path, "stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": is " + FileTypeName(st.st_mode) + ", not a regular file");
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = path;
  size_bytes_ = static_cast<uint64_t>(st.st_size);
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
