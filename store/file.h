// File reads with errors as Status. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/status.h"

namespace granary {

// Replaces *out with the contents of `path`. NotFound if it does not exist,
// IOError (with errno) if it cannot be opened or read. Reuses *out's capacity.
Status ReadFile(const std::string& path, std::string* out);

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

  // IOError naming `path` (with errno) if it cannot be opened.
  Status Open(const std::string& path);
  // Reads exactly `bytes` at `offset` into dst. IOError naming the file, or
  // Corruption if the file ends first.
  Status ReadAt(uint64_t offset, size_t bytes, char* dst) const;
  // Tells the kernel the range will be read soon; a hint, failures ignored.
  void WillNeed(uint64_t offset, size_t bytes) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace granary
