// libFuzzer target: a CSV table with label column "y", as `prep build` opens
// it (from a file on /dev/shm), every row produced: a status per row, never a
// crash (run under ASan/UBSan by tools/fuzz). Bit 0 of the first byte picks
// the missing-value policy, bit 1 a held-out split, bit 2 a --limit of 3,
// bit 3 a table without a header (--no-header, label column 2).
// The text parsed in pieces of (first byte >> 3) + 1 bytes must give the
// rows of one parse of the whole (the streaming reader's invariant), split
// at commas and at runs of whitespace. The same file is then opened as a
// LIBSVM file, every line produced.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "preprocess/csv_table.h"
#include "preprocess/source.h"

namespace {

// Each row as its line followed by its fields.
std::vector<std::vector<std::string>> ParseInPieces(std::string_view text, size_t piece, char delimiter) {
  std::vector<std::vector<std::string>> rows;
  granary::CsvParser parser;
  parser.Reset();
  parser.SetDelimiter(delimiter);
  const auto on_row = [&](const granary::CsvParser::Row& r) {
    rows.push_back({std::to_string(r.line)});
    rows.back().insert(rows.back().end(), r.fields->begin(), r.fields->end());
    return granary::Status::OK();
  };
  for (size_t at = 0; at < text.size(); at += piece) (void)parser.Feed(text.substr(at, piece), on_row);
  if (!parser.End("fuzz", on_row).ok()) rows.push_back({"unterminated"});
  return rows;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = "/dev/shm/granary-csv-fuzz-" + std::to_string(::getpid()) + ".csv";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (char delimiter : {',', granary::kWhitespaceDelimiter}) {
    if (ParseInPieces(text, text.size() + 1, delimiter) != ParseInPieces(text, (data[0] >> 3) + 1, delimiter)) {
      std::abort();
    }
  }
  granary::CsvOptions options;
  options.label = "y";
  options.missing = (data[0] & 1) ? granary::MissingPolicy::kNaN : granary::MissingPolicy::kReject;
  options.val_fraction = (data[0] & 2) ? 0.3 : 0.0;
  options.limit = (data[0] & 4) ? 3 : 0;
  if (data[0] & 8) {  // --no-header: columns named 1..N, the second the label
    options.header = false;
    options.label = "2";
  }
  options.temp_dir = "/dev/shm";  // a gzip or zstd table's copy
  const auto produce_all = [](const granary::StatusOr<granary::Source>& source) {
    if (!source.ok()) return;
    for (const auto& split : source->splits) {
      for (uint64_t i = 0; i < split->size(); ++i) {
        granary::Sample sample;
        (void)split->Produce(i, &sample);
        (void)split->ItemName(i);
      }
    }
  };
  produce_all(granary::OpenCsvSource(path, options));
  granary::CsvOptions svmlight;
  svmlight.val_fraction = options.val_fraction;
  svmlight.limit = options.limit;
  svmlight.regression = (data[0] & 1) != 0;
  svmlight.temp_dir = "/dev/shm";
  (void)granary::LooksLikeSvmlight(text);
  produce_all(granary::OpenSvmlightSource(path, svmlight));
  std::remove(path.c_str());
  return 0;
}
