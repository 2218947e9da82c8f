// Raw input files that arrive compressed (a Kaggle `train.csv.gz`, a
// `table.csv.zst`): what compression a file starts with, and its text
// decompressed into an unnamed temporary file, which prep then reads as the
// file itself. Internal to preprocess (preprocess/csv_table.cc).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace granary {

class ProgressLine;

// The compression whose magic bytes `start` (a file's first bytes, at least 6
// of them where the file has them) begins with: "gzip", "zstd", "bzip2", "xz",
// "zip"; "" for none of them.
std::string CompressionOf(std::string_view start);

// How to decompress a file of `compression` with a command line tool, for a
// message: "gunzip -k FILE", "unzstd FILE", ...
std::string DecompressCommand(const std::string& compression, const std::string& path);

// Decompresses `path`, a gzip (one or more members) or zstd stream, into an
// unnamed file in `temp_dir` (prep's: $TMPDIR, else /tmp): O_TMPFILE, or a
// file removed as soon as it is made, so nothing is left behind whatever ends
// the process. Returns its descriptor (the caller closes it; the file goes
// with it), read from its start. Errors name `path` (a damaged or cut stream)
// or `temp_dir` (no room: set TMPDIR). The compressed bytes read are added
// to `progress` as they are read, where given.
StatusOr<int> DecompressToUnnamedFile(const std::string& path, const std::string& compression,
                                      const std::string& temp_dir, ProgressLine* progress = nullptr);

}  // namespace granary
