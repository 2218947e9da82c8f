#include "preprocess/compressed_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>

#include "base/file.h"
#include "preprocess/progress.h"

namespace granary {
namespace {

constexpr size_t kPiece = 1 << 20;

// An unnamed file in `dir`, open for reading and writing.
StatusOr<int> UnnamedFile(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    return Status::IOError(dir, "create a temporary file (set TMPDIR to a directory prep may write)", errno);
  }
  std::string name = dir + "/granary-prep.XXXXXX";  // a file system without O_TMPFILE: named for an instant
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return Status::IOError(dir, "create a temporary file (set TMPDIR to a directory prep may write)", errno);
  ::unlink(name.c_str());
  return fd;
}

// Writes `bytes` at the end of the unnamed file `fd` in `dir`.
Status Append(int fd, const std::string& dir, const char* bytes, size_t size) {
  const int err = WriteAll(fd, bytes, size);
  if (err == 0) return Status::OK();
  return Status::IOError(dir, "write the decompressed table to a temporary file" +
                                  std::string(err == ENOSPC ? " (set TMPDIR to a directory with room)" : ""),
                         err);
}

Status Gunzip(const std::string& path, int out, const std::string& dir, ProgressLine* progress) {
  gzFile in = gzopen(path.c_str(), "rb");
  if (in == nullptr) return Status::IOError(path, "open", errno);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> owned(in, gzclose);
  gzbuffer(in, kPiece);
  std::vector<char> piece(kPiece);
  for (z_off_t read = 0;;) {
    const int n = gzread(in, piece.data(), static_cast<unsigned>(piece.size()));
    if (const z_off_t at = gzoffset(in); progress != nullptr && at > read) {
      progress->Add(static_cast<uint64_t>(at - read), 0);
      read = at;
    }
    if (n < 0) {
      int code = 0;
      const std::string what = gzerror(in, &code);
      return Status::InvalidArgument(path + ": damaged gzip data (" + what + ")");
    }
    if (n == 0) break;
    GRANARY_RETURN_IF_ERROR(Append(out, dir, piece.data(), static_cast<size_t>(n)));
  }
  const int rc = gzclose(owned.release());
  if (rc == Z_BUF_ERROR) return Status::InvalidArgument(path + ": the gzip data ends early (a cut download?)");
  if (rc != Z_OK) return Status::InvalidArgument(path + ": gzip error " + std::to_string(rc));
  return Status::OK();
}

Status Unzstd(const std::string& path, int out, const std::string& dir, ProgressLine* progress) {
  ReadOnlyFile file;
  GRANARY_RETURN_IF_ERROR(file.Open(path));
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> stream(ZSTD_createDStream(), ZSTD_freeDStream);
  ZSTD_initDStream(stream.get());
  std::vector<char> in(ZSTD_DStreamInSize()), piece(ZSTD_DStreamOutSize());
  size_t last = 0;  // 0 where a frame ended and nothing more was asked for
  for (uint64_t at = 0; at < file.size_bytes();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(in.size(), file.size_bytes() - at));
    GRANARY_RETURN_IF_ERROR(file.ReadAt(at, n, in.data()));
    at += n;
    if (progress != nullptr) progress->Add(n, 0);
    ZSTD_inBuffer input{in.data(), n, 0};
    bool full = true;  // the output was filled: the stream may hold more of it
    while (input.pos < input.size || full) {
      ZSTD_outBuffer output{piece.data(), piece.size(), 0};
      last = ZSTD_decompressStream(stream.get(), &output, &input);
      if (ZSTD_isError(last)) {
        return Status::InvalidArgument(path + ": damaged zstd data (" + ZSTD_getErrorName(last) + ")");
      }
      GRANARY_RETURN_IF_ERROR(Append(out, dir, piece.data(), output.pos));
      full = output.pos == output.size;
    }
  }
  // A frame not ended is a cut file.
  if (last != 0) return Status::InvalidArgument(path + ": the zstd data ends early (a cut download?)");
  return Status::OK();
}

}  // namespace

std::string CompressionOf(std::string_view start) {
  if (start.substr(0, 2) == "\x1f\x8b") return "gzip";
  if (start.substr(0, 4) == "\x28\xb5\x2f\xfd") return "zstd";
  if (start.substr(0, 3) == "BZh") return "bzip2";
  if (start.substr(0, 6) == std::string_view("\xfd" "7zXZ\0", 6)) return "xz";
  if (start.substr(0, 4) == "PK\x03\x04") return "zip";
  return "";
}

std::string DecompressCommand(const std::string& compression, const std::string& path) {
  if (compression == "gzip") return "gunzip -k " + path;
  if (compression == "zstd") return "unzstd " + path;
  if (compression == "bzip2") return "bunzip2 -k " + path;
  if (compression == "xz") return "unxz -k " + path;
  return "unzip " + path;
}

StatusOr<int> DecompressToUnnamedFile(const std::string& path, const std::string& compression,
                                      const std::string& dir, ProgressLine* progress) {
  GRANARY_ASSIGN_OR_RETURN(const int fd, UnnamedFile(dir));
  Status done = compression == "gzip"   ? Gunzip(path, fd, dir, progress)
                : compression == "zstd" ? Unzstd(path, fd, dir, progress)
                                        : Status::InvalidArgument(path + ": " + compression + " is not decompressed here");
  if (done.ok() && ::lseek(fd, 0, SEEK_SET) != 0) done = Status::IOError(dir, "seek a temporary file", errno);
  if (!done.ok()) {
    ::close(fd);
    return done;
  }
  return fd;
}

}  // namespace granary
