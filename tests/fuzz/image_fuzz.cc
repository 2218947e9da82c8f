// libFuzzer target: the image entry points `prep build` uses on every file of
// an image folder, JPEG, PNG or WebP (the PNG fast path included), with the decode
// memory limit lowered so that declared sizes are refused before allocation:
// a status, never a crash (run under ASan/UBSan by tools/fuzz). The first
// byte picks the target size and channels.
#include <cstddef>
#include <cstdint>

#include "preprocess/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  granary::ImageTransform t;
  t.width = 1 + (data[0] & 0x1F);
  t.height = 1 + ((data[0] >> 2) & 0x1F);
  t.channels = (data[0] & 0x80) ? 1 : 3;
  t.max_decode_bytes = uint64_t{64} << 20;
  granary::Image out;
  (void)granary::DecodeImage(data + 1, size - 1, t, &out);
  return 0;
}
