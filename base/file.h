// Files with errors as Status: whole-file reads and synced or atomic writes,
// positioned reads, and an exclusive lock on a directory. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace granary {

// "a regular file", "a directory", "a FIFO", ... for a stat(2) st_mode.
const char* FileTypeName(unsigned mode);

// Replaces *out with the contents of `path`. NotFound if it does not exist,
// IOError (with errno) if it cannot be opened or read. Reuses *out's capacity.
Status ReadFile(const std::string& path, std::string* out);

// As ReadFile, for a regular file of at most `max_bytes`, checked before
// anything is read: InvalidArgument naming the file if it is not a regular
// file (a FIFO, a device), Corruption if it is larger.
Status ReadBoundedFile(const std::string& path, uint64_t max_bytes, std::string* out);

// At most `max_bytes` of the regular file `path`: its first bytes, or with
// `from_end` its last; "" where it cannot be opened (missing, not a regular
// file) or read. For sniffing what a file is, where an error is no answer.
std::string ReadFileEdge(const std::string& path, size_t max_bytes, bool from_end = false);

// Whether `head` (a file's first bytes) is a Git LFS pointer: the text a
// repository cloned without git-lfs holds in place of each large file. And
// what to do about one, for a message.
inline bool IsGitLfsPointer(std::string_view head) {
  return head.substr(0, 40) == "version https://git-lfs.github.com/spec/";
}
inline constexpr char kGitLfsAdvice[] =
    "a Git LFS pointer, not the file itself (the repository was cloned without git-lfs): fetch the files with "
    "git lfs pull in the repository";

// Whether `head` (a file's first bytes) is an HTML page: "<!DOCTYPE html"
// or "<html", in any case, after blanks.
bool IsHtmlPage(std::string_view head);

// Writes `contents` to `path` (created or truncated) and fsyncs it. A
// symlink at `path` is refused (ELOOP), never written through.
Status WriteFileSynced(const std::string& path, const std::string& contents);

// How WriteFileAtomically treats a symlink at its path, and how durable the
// new contents are.
struct AtomicWriteOptions {
  // True: the file the link names is replaced and the link kept (a path a
  // user gave, such as --save). False: refused with InvalidArgument naming
  // the path (a file in a directory granary owns: a checkpoint, a run record).
  bool through_links = true;
  // Also fsync the file before its rename and its directory after: it
  // survives the machine, not only the process.
  bool sync = false;
};

// Writes `contents` to a temporary file of a new, unique name beside `path`
// (created with O_EXCL | O_NOFOLLOW, so no link or file already there is
// ever written through; see TemporaryNameBase) and renames it over `path`, so
// a killed process leaves the old or the new contents, never a mix; a failed
// write leaves no temporary file. The file's mode is 0666 less the umask.
Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           const AtomicWriteOptions& options = {});

// From now on SIGINT, SIGTERM and SIGHUP, where the program left them at
// their default action, first remove the temporary files WriteFileAtomically
// is writing (a checkpoint, a saved model), then end the process as before:
// a stopped run leaves no BASE.tmp-XXXXXX behind.
void RemoveTemporariesOnStopSignals();
// Removes the temporary files WriteFileAtomically is writing, now
// (async-signal-safe: for a program's own signal handler).
void RemoveTemporaryFilesNow();
// The handler RemoveTemporariesOnStopSignals installs, for a program's own
// to end with: RemoveTemporaryFilesNow, then `sig`'s default action.
extern "C" void RemoveTemporariesAndDie(int sig);

// The name of the file whose temporary file WriteFileAtomically would name
// `name` (a file name, no directory): BASE for "BASE.tmp-XXXXXX", or for
// "BASE.tmp" as earlier versions named it; "" if `name` is neither. A write
// killed before its rename leaves one.
std::string TemporaryNameBase(const std::string& name);

// Flushes stdout (and std::cout, which writes through it); IOError naming
// "stdout" if anything written to it was lost (a full disk, /dev/full).
Status FlushStdout();
// Flushes stdout as a report goes, keeping the first failure's errno for
// FlushStdout, which names it (the stream's error flag keeps no reason).
void FlushStdoutNoting();

// Writes all of `n` bytes at `data` to `fd`, again after EINTR and short
// writes (a pipe, a full disk's last bytes); errno of the failure (EIO for a
// write of nothing), or 0.
int WriteAll(int fd, const char* data, size_t n);

// fsync of a file or directory (a directory's, after a rename into it).
Status FsyncPath(const std::string& path);

// Bytes free to this process on the file system holding `path`, or that
// would hold it (its nearest existing folder: a path not made yet), or -1
// where statvfs cannot say.
int64_t FreeDiskBytes(const std::string& path);

// A size for a message, to two or three figures: "4.1 GB", "850 MB", "12 kB".
std::string ApproxBytes(double bytes);

// Raises this process's soft limit on open files to its hard limit: a reader
// keeps two descriptors per shard, and a db may have thousands of shards.
void RaiseOpenFileLimit();

// An exclusive advisory lock (flock) on a directory, held while the object
// lives and released by the kernel if the process dies, so a lock left by a
// killed process never blocks anyone.
class DirectoryLock {
 public:
  DirectoryLock() = default;
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  // Locks the directory at `path` without waiting. Busy if another process
  // (or another DirectoryLock) holds it; IOError naming `path` otherwise. On success the
  // directory still has that name (a directory renamed or removed between the
  // open and the lock is not the one asked for: that is retried).
  Status TryLock(const std::string& path);
  bool held() const { return fd_ >= 0; }
  void Release();

 private:
  int fd_ = -1;
};

// Bytes of a file read with direct I/O: file bytes [first, first + size) at
// data(), in pages of their own (mapped for it, unmapped on destruction, so
// memory read this way goes back to the system as it is freed).
class DirectRead {
 public:
  static constexpr size_t kAlignment = 4096;  // of offsets, lengths and buffers: every device's block size divides it
  DirectRead() = default;
  ~DirectRead();
  DirectRead(DirectRead&& other) noexcept;
  DirectRead& operator=(DirectRead&& other) noexcept;
  DirectRead(const DirectRead&) = delete;
  DirectRead& operator=(const DirectRead&) = delete;

  const char* data() const { return buffer_; }
  uint64_t first() const { return first_; }
  size_t size() const { return size_; }
  // Whether it holds file bytes [offset, offset + bytes).
  bool Holds(uint64_t offset, size_t bytes) const { return offset >= first_ && offset + bytes <= first_ + size_; }

 private:
  friend class ReadOnlyFile;
  char* buffer_ = nullptr;
  size_t capacity_ = 0;  // bytes mapped at buffer_
  uint64_t first_ = 0;
  size_t size_ = 0;
};

// A file opened read-only for positioned reads, which any number of threads
// may issue at once. Closes the file on destruction.
class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // IOError naming `path` (with errno) if it cannot be opened;
  // InvalidArgument if it is not a regular file (a FIFO, a device).
  Status Open(const std::string& path);
  // As Open, of the file open at `fd`, which this object owns from now on
  // (closed here on failure); `name` stands for it in messages.
  Status Adopt(int fd, const std::string& name);
  // Reads exactly `bytes` at `offset` into dst. IOError naming the file, or
  // Corruption if the file ends first.
  Status ReadAt(uint64_t offset, size_t bytes, char* dst) const;
  // Tells the kernel the range will be read soon; a hint, failures ignored.
  void WillNeed(uint64_t offset, size_t bytes) const;
  // Tells the kernel the range will not be read again soon: its clean pages
  // leave the page cache (for every process reading the file); a hint,
  // failures ignored.
  void WontNeed(uint64_t offset, size_t bytes) const;
  // Reads at least [offset, offset + bytes) around the page cache (O_DIRECT,
  // through a second descriptor of the same file, opened on first use), for
  // large reads the page cache should neither keep nor be made to drop:
  // whole pages into *out's buffer, mapped anew only where it is too small
  // (reuse one: unmapping costs every core a TLB flush). IOError naming the
  // file where its file system has no direct I/O (tmpfs before Linux 6.6),
  // Corruption if the file ends first; *out then holds nothing.
  Status ReadDirect(uint64_t offset, size_t bytes, DirectRead* out) const;
  const std::string& path() const { return path_; }
  // The file's size when it was opened.
  uint64_t size_bytes() const { return size_bytes_; }
  // Corruption naming the file if its size or modification time is not what
  // it was when opened (a file rewritten in place; one replaced by a rename
  // is still the file this object reads).
  Status CheckUnchanged() const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_bytes_ = 0;
  int64_t mtime_ns_ = 0;
  mutable std::atomic<int> direct_fd_{-1};  // O_DIRECT, opened by the first ReadDirect
};

}  // namespace granary
