// IDX files (the MNIST family's format), plain or gzipped, and finding the
// train/test pairs of an IDX dataset folder. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/schema.h"

namespace granary {

// An IDX array in host byte order.
struct IdxArray {
  DType dtype = DType::kUInt8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // prod(dims) * DTypeBytes(dtype) bytes
};

// Parses the bytes of an IDX file. `origin` names the file in errors, e.g.
// "train-images-idx3-ubyte.gz: truncated: header promises 47040000 data bytes, file has 1000".
StatusOr<IdxArray> ParseIdx(const uint8_t* bytes, size_t size, const std::string& origin);

// Reads and parses an IDX file, gunzipping it if it is gzipped.
StatusOr<IdxArray> ReadIdxFile(const std::string& path);

struct IdxSplitFiles {
  std::string name;  // "train" or "test"
  std::string images_path;
  std::string labels_path;
};

// Finds "train-images-idx3-ubyte" / "train-labels-idx1-ubyte" and the "t10k-"
// pair in `dir` (with or without ".gz", "-" or "." before "idx"). NotFound
// naming what is missing; the train pair is required, the test pair optional.
StatusOr<std::vector<IdxSplitFiles>> FindIdxDataset(const std::string& dir);

}  // namespace granary
