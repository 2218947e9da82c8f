#include "preprocess/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/file.h"

namespace granary {
namespace {

uint32_t ReadBE32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

StatusOr<DType> IdxDType(uint8_t code) {
  switch (code) {
    case 0x08: return DType::kUInt8;
    case 0x09: return DType::kInt8;
    case 0x0B: return DType::kInt16;
    case 0x0C: return DType::kInt32;
    case 0x0D: return DType::kFloat32;
    case 0x0E: return DType::kFloat64;
    default: return Status::InvalidArgument("unknown IDX type code " + std::to_string(code));
  }
}

std::string HexByte(uint8_t b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return {kDigits[b >> 4], kDigits[b & 15]};
}

// Largest IDX file we accept (the format's dims are u32; this bounds memory).
constexpr uint64_t kMaxIdxDataBytes = uint64_t{16} << 30;

}  // namespace

StatusOr<IdxArray> ParseIdx(const uint8_t* bytes, size_t size, const std::string& origin) {
  if (size < 4) return Status::InvalidArgument(origin + ": not an IDX file (" + std::to_string(size) + " bytes)");
  if (IsGitLfsPointer({reinterpret_cast<const char*>(bytes), size})) {
    return Status::InvalidArgument(origin + ": is " + kGitLfsAdvice);
  }
  if (bytes[0] != 0 || bytes[1] != 0) return Status::InvalidArgument(origin + ": not an IDX file (bad magic)");
  StatusOr<DType> dtype = IdxDType(bytes[2]);
  if (!dtype.ok()) return Status::InvalidArgument(origin + ": not an IDX file (" + dtype.status().message() + ")");
  const int ndims = bytes[3];
  if (ndims < 1) return Status::InvalidArgument(origin + ": not an IDX file (0 dimensions)");
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (size < header) return Status::InvalidArgument(origin + ": truncated inside the header");

  IdxArray out;
  out.dtype = dtype.value();
  uint64_t elements = 1;
  for (int i = 0; i < ndims; ++i) {
    uint32_t d = ReadBE32(bytes + 4 + 4 * i);
    out.dims.push_back(d);
    elements *= d;
    if (elements * DTypeBytes(out.dtype) > kMaxIdxDataBytes) {
      return Status::InvalidArgument(origin + ": dims describe more than 16 GiB");
    }
  }
  const uint64_t data_bytes = elements * DTypeBytes(out.dtype);
  if (size - header < data_bytes) {
    return Status::InvalidArgument(origin + ": truncated: header promises " + std::to_string(data_bytes) +
                                   " data bytes, file has " + std::to_string(size - header));
  }
  if (size - header > data_bytes) {
    std::string dims;
    for (uint32_t d : out.dims) dims += (dims.empty() ? "" : " x ") + std::to_string(d);
    return Status::InvalidArgument(origin + ": its header (magic 0x0000" + HexByte(bytes[2]) + HexByte(bytes[3]) +
                                   ": " + std::to_string(ndims) + "-dim " + DTypeName(out.dtype) + ", " + dims +
                                   ") describes " + std::to_string(data_bytes) + " data bytes, and " +
                                   std::to_string(size - header - data_bytes) +
                                   " more follow: not the IDX file its name says (images are 3-dim, labels 1-dim), "
                                   "or a damaged header");
  }
  out.data.assign(bytes + header, bytes + header + data_bytes);
  const size_t width = DTypeBytes(out.dtype);
  if (width > 1) {  // IDX is big-endian; convert in place.
    for (size_t off = 0; off < out.data.size(); off += width) {
      std::reverse(out.data.begin() + off, out.data.begin() + off + width);
    }
  }
  return out;
}

StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Status::IOError(path, "open", errno);
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    size_t at = bytes.size();
    bytes.resize(at + kChunk);
    int n = gzread(f, bytes.data() + at, kChunk);
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      return Status::InvalidArgument(path + ": gzip data is damaged (" + msg + ")");
    }
    bytes.resize(at + static_cast<size_t>(n));
    if (n == 0) break;
    if (bytes.size() > kMaxIdxDataBytes) {
      gzclose(f);
      return Status::InvalidArgument(path + ": larger than 16 GiB");
    }
  }
  int rc = gzclose(f);
  if (rc == Z_BUF_ERROR) return Status::InvalidArgument(path + ": truncated gzip stream");
  if (rc != Z_OK) return Status::InvalidArgument(path + ": gzip error " + std::to_string(rc));
  return ParseIdx(bytes.data(), bytes.size(), path);
}

StatusOr<std::vector<IdxSplitFiles>> FindIdxDataset(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::NotFound(dir + ": no such folder");
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(dir + ": is not a folder");

  // The file for stem + kind, or "" if none; two copies (x and x.gz, say)
  // must hold the same data, or which is meant cannot be told.
  std::string conflict;
  auto find = [&](const std::string& stem, const std::string& kind) -> std::string {
    std::vector<std::string> found;
    for (const char* sep : {"-", "."}) {
      for (const char* ext : {"", ".gz"}) {
        fs::path p = fs::path(dir) / (stem + sep + kind + "-ubyte" + ext);
        if (fs::is_regular_file(p, ec)) found.push_back(p.string());
      }
    }
    for (size_t i = 1; i < found.size() && conflict.empty(); ++i) {
      StatusOr<IdxArray> first = ReadIdxFile(found[0]), other = ReadIdxFile(found[i]);
      if (!first.ok() || !other.ok() || first->dims != other->dims || first->data != other->data) {
        conflict = dir + ": both " + found[0] + " and " + found[i] + " are there, and they differ: remove the one " +
                   "that is not meant";
      }
    }
    return found.empty() ? "" : found[0];
  };
  std::vector<IdxSplitFiles> splits;
  for (auto [prefix, name] : {std::pair<const char*, const char*>{"train", "train"}, {"t10k", "test"}}) {
    IdxSplitFiles files{name, find(std::string(prefix) + "-images", "idx3"),
                        find(std::string(prefix) + "-labels", "idx1")};
    if (!conflict.empty()) return Status::InvalidArgument(conflict);
    if (files.images_path.empty() && files.labels_path.empty()) continue;
    if (files.images_path.empty()) {
      return Status::NotFound(dir + ": has " + files.labels_path + " but no " + prefix + "-images-idx3-ubyte[.gz]");
    }
    if (files.labels_path.empty()) {
      return Status::NotFound(dir + ": has " + files.images_path + " but no " + prefix + "-labels-idx1-ubyte[.gz]");
    }
    splits.push_back(std::move(files));
  }
  if (splits.empty() || splits[0].name != "train") {
    bool empty = fs::is_empty(dir, ec);
    return Status::NotFound(dir + ": " + (empty ? "folder is empty" : "no IDX dataset found") +
                            " (expected train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz], "
                            "optionally t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz])");
  }
  return splits;
}

}  // namespace granary
