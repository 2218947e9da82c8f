// Writing 8-bit images as PNG files (libpng), for people to look at records.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace granary {

// Writes an 8-bit image of `channels` (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
// interleaved per pixel (HWC), rows top to bottom.
Status WritePng(const std::string& path, const uint8_t* pixels, int width, int height, int channels);

}  // namespace granary
