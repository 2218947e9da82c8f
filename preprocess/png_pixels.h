// The fast path for the PNGs photo folders hold: non-interlaced, 8 bits a
// sample, gray or RGB. Debian's libspng and libpng unfilter these a byte at a
// time with a branch per byte (no SIMD in their builds), where most of a
// photo PNG's build time went (docs/BENCHMARKS.md). This path inflates with libdeflate and unfilters a
// pixel at a time; every other PNG, and every PNG this path finds fault with,
// goes to libspng, whose verdict and message stand.
#ifndef GRANARY_PREPROCESS_PNG_PIXELS_H_
#define GRANARY_PREPROCESS_PNG_PIXELS_H_

#include <cstddef>
#include <cstdint>

namespace granary {

// Decodes the pixels of the PNG in data[0, size) whose header (already checked
// by the caller) declares width x height, bit depth 8, no interlace, and gray
// (channels 1) or RGB (channels 3) samples, into out: height rows of
// width * channels bytes. Checks every chunk's bounds and CRC, that only
// known critical chunks appear, and that the zlib stream (its Adler-32 too)
// holds exactly the image. Returns false, with `out` in an unspecified state,
// if anything is off. Thread-safe.
bool DecodePlainPngPixels(const uint8_t* data, size_t size, uint32_t width, uint32_t height, int channels,
                          uint8_t* out);

}  // namespace granary

#endif  // GRANARY_PREPROCESS_PNG_PIXELS_H_
