// libFuzzer target: a CSV table with label column "y", as `prep build` opens
// it (from a file on /dev/shm), every row produced: a status per row, never a
// crash (run under ASan/UBSan by tools/fuzz). Bit 0 of the first byte picks
// the missing-value policy, bit 1 a held-out split.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "preprocess/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = "/dev/shm/granary-csv-fuzz-" + std::to_string(::getpid()) + ".csv";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  granary::CsvOptions options;
  options.label = "y";
  options.missing = (data[0] & 1) ? granary::MissingPolicy::kNaN : granary::MissingPolicy::kReject;
  options.val_fraction = (data[0] & 2) ? 0.3 : 0.0;
  auto source = granary::OpenCsvSource(path, options);
  if (source.ok()) {
    for (const auto& split : source->splits) {
      for (uint64_t i = 0; i < split->size(); ++i) {
        granary::Sample sample;
        (void)split->Produce(i, &sample);
        (void)split->ItemName(i);
      }
    }
  }
  std::remove(path.c_str());
  return 0;
}
