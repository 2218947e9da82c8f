#include "base/file.h"

#include <algorithm>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
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

bool IsHtmlPage(std::string_view head) {
  const size_t text = std::min(head.size(), head.find_first_not_of(" \t\r\n"));
  std::string start(head.substr(text, 14));
  for (char& c : start) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return start.rfind("<!doctype html", 0) == 0 || start.rfind("<html", 0) == 0;
}

std::string ReadFileEdge(const std::string& path, size_t max_bytes, bool from_end) {
  ReadOnlyFile file;
  if (!file.Open(path).ok()) return "";
  const size_t n = static_cast<size_t>(std::min<uint64_t>(file.size_bytes(), max_bytes));
  std::string bytes(n, '\0');
  return file.ReadAt(from_end ? file.size_bytes() - n : 0, n, bytes.data()).ok() ? bytes : "";
}

namespace {

// The suffix of a temporary file's name: ".tmp-" and kTemporaryChars characters.
constexpr char kTemporaryMark[] = ".tmp-";
constexpr size_t kTemporaryChars = 6;

// Writes all of `contents` to `fd` and closes it (fsynced first when
// `sync`); IOError naming `path` otherwise (the descriptor closed too).
Status WriteAndClose(int fd, const std::string& path, const std::string& contents, bool sync) {
  if (const int err = WriteAll(fd, contents.data(), contents.size()); err != 0) {
    ::close(fd);
    return Status::IOError(path, "write", err);
  }
  if (sync && ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(path, "fsync", err);
  }
  if (::close(fd) != 0) return Status::IOError(path, "close", errno);
  return Status::OK();
}

// The temporary files being written (WriteFileAtomically), for the handler
// RemoveTemporariesOnStopSignals installs: slots a writer claims (kClaimed)
// and fills, then publishes (kReady) before it creates the file, so that a
// signal delivered as open() returns, before the writer could say it had
// made the file, still removes it. (Should open() find the random name taken
// and fail, the slot is freed at once; a signal in that instant would remove
// the other file of that name, a granary temporary in all but the most
// unlikely case.)
constexpr int kFree = 0, kClaimed = 1, kReady = 2;
struct TemporarySlot {
  std::atomic<int> state{kFree};
  char path[4096];
};
TemporarySlot g_temporaries[16];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slots");

// Publishes `path` for the handler while it lives; a path too long, or no
// free slot, is simply not published.
class PublishedTemporary {
 public:
  explicit PublishedTemporary(const std::string& path) {
    if (path.size() >= sizeof(TemporarySlot::path)) return;
    for (TemporarySlot& slot : g_temporaries) {
      int expected = kFree;
      if (slot.state.compare_exchange_strong(expected, kClaimed)) {
        std::memcpy(slot.path, path.c_str(), path.size() + 1);
        slot.state.store(kReady);
        slot_ = &slot;
        return;
      }
    }
  }
  ~PublishedTemporary() {
    if (slot_ != nullptr) slot_->state.store(kFree);
  }
  PublishedTemporary(const PublishedTemporary&) = delete;
  PublishedTemporary& operator=(const PublishedTemporary&) = delete;

 private:
  TemporarySlot* slot_ = nullptr;
};

// Creates a file of a new name "<path>.tmp-XXXXXX" for writing, as mkstemp
// does (O_EXCL: nothing already there, a link included, is opened) but with
// mode 0666 less the umask, as the file it becomes would have; its name is
// published (*published) for the stop-signal handler from before it exists.
StatusOr<std::pair<int, std::string>> CreateTemporary(const std::string& path,
                                                      std::optional<PublishedTemporary>* published) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 random(std::random_device{}() ^
                                      static_cast<uint64_t>(::getpid()) << 32 ^
                                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  int err = EEXIST;
  for (int attempt = 0; attempt < 100 && err == EEXIST; ++attempt) {
    std::string name = path + kTemporaryMark;
    for (size_t i = 0; i < kTemporaryChars; ++i) name += kChars[random() % (sizeof(kChars) - 1)];
    published->emplace(name);
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return std::make_pair(fd, std::move(name));
    err = errno;
    published->reset();
  }
  return Status::IOError(path, "create a temporary file beside", err);
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status WriteFileSynced(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return Status::IOError(path, "create", errno);
  return WriteAndClose(fd, path, contents, /*sync=*/true);
}

Status WriteFileAtomically(const std::string& path, const std::string& contents, const AtomicWriteOptions& options) {
  std::string target = path;
  struct stat link;
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    if (!options.through_links) {
      return Status::InvalidArgument(path + ": is a symlink; granary writes this file itself and never through a link");
    }
    char* real = ::realpath(path.c_str(), nullptr);  // the link stays, what it names is replaced
    if (real == nullptr) return Status::IOError(path, "resolve the symlink", errno);
    target = real;
    std::free(real);
  }
  std::optional<PublishedTemporary> published;  // a stop signal from its creation on removes the temporary file
  StatusOr<std::pair<int, std::string>> created = CreateTemporary(target, &published);
  if (!created.ok()) return created.status();
  const auto& [fd, tmp] = created.value();
  Status written = WriteAndClose(fd, tmp, contents, options.sync);
  if (written.ok() && std::rename(tmp.c_str(), target.c_str()) != 0) {
    written = Status::IOError(target, "rename from " + tmp, errno);
  }
  if (!written.ok()) {
    ::unlink(tmp.c_str());  // no half-written file left behind
    return written;
  }
  return options.sync ? FsyncPath(DirectoryOf(target)) : Status::OK();
}

void RemoveTemporaryFilesNow() {
  for (TemporarySlot& slot : g_temporaries) {
    if (slot.state.load() == kReady) ::unlink(slot.path);
  }
}

// Async-signal-safe: unlinks every published temporary file, then dies of
// the signal as it would have without the handler.
extern "C" void RemoveTemporariesAndDie(int sig) {
  RemoveTemporaryFilesNow();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void RemoveTemporariesOnStopSignals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;  // the program's own
    struct sigaction action {};
    action.sa_handler = RemoveTemporariesAndDie;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
}

std::string TemporaryNameBase(const std::string& name) {
  const size_t mark = sizeof(kTemporaryMark) - 1;
  if (name.size() > mark + kTemporaryChars &&
      name.compare(name.size() - kTemporaryChars - mark, mark, kTemporaryMark) == 0) {
    return name.substr(0, name.size() - kTemporaryChars - mark);
  }
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) return name.substr(0, name.size() - 4);
  return "";
}

namespace {

// Why stdout's first failed flush failed (0: none failed, or none was seen).
std::atomic<int> stdout_errno{0};

}  // namespace

void FlushStdoutNoting() {
  if (std::fflush(stdout) == 0) return;
  int none = 0;
  stdout_errno.compare_exchange_strong(none, errno);
}

Status FlushStdout() {
  if (std::fflush(stdout) != 0) return Status::IOError("stdout", "write", errno);
  // A write that failed earlier (the stream's error flag) is named with the
  // reason FlushStdoutNoting saw then, or none: errno now is another call's.
  if (std::ferror(stdout)) return Status::IOError("stdout", "write", stdout_errno.load());
  return Status::OK();
}

int WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
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

int64_t FreeDiskBytes(const std::string& path) {
  std::string there = path.empty() ? "." : path;
  struct statvfs fs {};
  while (::statvfs(there.c_str(), &fs) != 0) {
    if (errno != ENOENT || there == "/" || there == ".") return -1;
    const size_t slash = there.find_last_of('/', there.size() - 2);  // past a trailing '/'
    there = slash == std::string::npos ? "." : slash == 0 ? "/" : there.substr(0, slash);
  }
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

std::string ApproxBytes(double bytes) {
  const char* unit = "kB";
  double value = bytes / 1e3;
  if (bytes >= 1e9) {
    unit = "GB";
    value = bytes / 1e9;
  } else if (bytes >= 1e6) {
    unit = "MB";
    value = bytes / 1e6;
  }
  char text[32];
  std::snprintf(text, sizeof(text), value < 10 ? "%.1f %s" : "%.0f %s", value, unit);
  return text;
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
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_bytes_(other.size_bytes_),
      mtime_ns_(other.mtime_ns_),
      direct_fd_(other.direct_fd_.exchange(-1)) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_bytes_ = other.size_bytes_;
    mtime_ns_ = other.mtime_ns_;
    direct_fd_ = other.direct_fd_.exchange(-1);
  }
  return *this;
}

Status ReadOnlyFile::Open(const std::string& path) {
  // Non-blocking: opening a FIFO would otherwise wait for a writer for ever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::IOError(path, "open", errno);
  return Adopt(fd, path);
}

Status ReadOnlyFile::Adopt(int fd, const std::string& name) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(name, "stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(name + ": is " + FileTypeName(st.st_mode) + ", not a regular file");
  }
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_.exchange(-1));
  fd_ = fd;
  path_ = name;
  size_bytes_ = static_cast<uint64_t>(st.st_size);
  mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return Status::OK();
}

Status ReadOnlyFile::CheckUnchanged() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::IOError(path_, "stat", errno);
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (static_cast<uint64_t>(st.st_size) != size_bytes_ || mtime_ns != mtime_ns_) {
    return Status::Corruption(path_ + ": changed since it was opened (its size or modification time differs)");
  }
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

DirectRead::~DirectRead() {
  if (buffer_ != nullptr) ::munmap(buffer_, capacity_);
}

DirectRead::DirectRead(DirectRead&& other) noexcept
    : buffer_(std::exchange(other.buffer_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      first_(other.first_),
      size_(std::exchange(other.size_, 0)) {}

DirectRead& DirectRead::operator=(DirectRead&& other) noexcept {
  if (this != &other) {
    if (buffer_ != nullptr) ::munmap(buffer_, capacity_);
    buffer_ = std::exchange(other.buffer_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    first_ = other.first_;
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status ReadOnlyFile::ReadDirect(uint64_t offset, size_t bytes, DirectRead* out) const {
  int fd = direct_fd_.load();
  if (fd < 0) {
    // The same file as fd_ (one renamed over its path since is not read).
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) return Status::IOError(path_, "open for direct I/O", errno);
    int expected = -1;
    if (!direct_fd_.compare_exchange_strong(expected, fd)) {  // another thread opened it first
      ::close(fd);
      fd = expected;
    }
  }
  constexpr uint64_t kAlign = DirectRead::kAlignment;
  const uint64_t first = offset / kAlign * kAlign;
  const uint64_t end = (offset + bytes + kAlign - 1) / kAlign * kAlign;
  const size_t length = static_cast<size_t>(end - first);
  DirectRead& read = *out;
  read.size_ = 0;
  if (read.capacity_ < length) {
    read = DirectRead();
    void* pages = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (pages == MAP_FAILED) return Status::IOError(path_, "map " + std::to_string(length) + " bytes to read into", errno);
    read.buffer_ = static_cast<char*>(pages);
    read.capacity_ = length;
  }
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, read.buffer_ + done, length - done, static_cast<off_t>(first + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(path_, "direct read of " + std::to_string(length) + " bytes at " + std::to_string(first),
                             errno);
    }
    if (n == 0) break;  // the file's end, in the last page
    done += static_cast<size_t>(n);
    if (done % kAlign != 0) break;  // only the file's end leaves a partial page
  }
  read.first_ = first;
  read.size_ = done;
  if (!read.Holds(offset, bytes)) {
    read.size_ = 0;
    return Status::Corruption(path_ + ": ends before byte " + std::to_string(offset + bytes) + " (a direct read of " +
                              std::to_string(length) + " bytes at " + std::to_string(first) + ")");
  }
  return Status::OK();
}

void ReadOnlyFile::WontNeed(uint64_t offset, size_t bytes) const {
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

}  // namespace granary
