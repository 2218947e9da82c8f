// libFuzzer target: ReadCheckpoint on arbitrary file contents (magic, header
// length, the JSON header with the run's config and position, the payload's
// size and hash) must return a status, never crash (run under ASan/UBSan by
// tools/fuzz). The LibTorch archive inside is not parsed here: it is loaded
// only after its XXH64 matches the header.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "trainer/checkpoint/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/granary-checkpoint-fuzz-" + std::to_string(::getpid()) + ".ckpt";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  (void)granary::ReadCheckpoint(path);
  std::remove(path.c_str());
  return 0;
}
