// Resizing 8-bit images (`prep build`'s image folders): separable
// triangle-filter resampling, widened by the scale factor when shrinking
// (antialiased, like PIL's BILINEAR). Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace granary {

// Resamples the w x h region at `src` (rows `stride` bytes apart, channels
// interleaved, 1 or 3 of them) to out_w x out_h pixels at `dst`.
void Resample(const uint8_t* src, int w, int h, size_t stride, int channels, int out_w, int out_h, uint8_t* dst);

}  // namespace granary
