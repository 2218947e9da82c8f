// libFuzzer target: arbitrary bytes as a WebDataset shard (a .tar file on
// /dev/shm), as `prep build` finds and opens it: every sample produced (its
// image decoded at 16 x 16, its .cls a label): a status each, never a crash
// (run under ASan/UBSan by tools/fuzz).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "preprocess/source.h"
#include "preprocess/webdataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/granary-tar-fuzz-" + std::to_string(::getpid()) + ".tar";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  (void)granary::IsWebDataset(path);
  granary::ImageFolderOptions options;
  options.width = options.height = 16;
  options.max_decode_bytes = 64 << 20;
  options.val_fraction = size % 2 == 0 ? 0.3 : 0.0;
  auto source = granary::OpenWebDatasetSource(path, options);
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
