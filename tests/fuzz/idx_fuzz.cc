// libFuzzer target: ParseIdx on arbitrary bytes (headers may declare any
// dims) must return a status, never crash or allocate what the bytes do not
// hold (run under ASan/UBSan by tools/fuzz).
#include <cstddef>
#include <cstdint>

#include "preprocess/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)granary::ParseIdx(data, size, "fuzz.idx");
  return 0;
}
