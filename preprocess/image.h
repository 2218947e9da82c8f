// Decoding JPEG, PNG and WebP files into fixed-size 8-bit images (HWC), the way
// `prep build` stores image folders: EXIF orientation applied, short side
// resized to cover the target, centre crop. Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

// An 8-bit image, rows top to bottom, channels interleaved (HWC).
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  // What the file held, for a build's notes: one gray channel (a gray JPEG
  // or PNG), and for DecodeImage whether the image was smaller than the
  // target and enlarged, with its own size then.
  bool gray_source = false;
  bool enlarged = false;
  int source_width = 0;
  int source_height = 0;
};

// Memory one image's decode may take by default (see ImageTransform).
inline constexpr uint64_t kDefaultMaxDecodeBytes = uint64_t{256} << 20;

struct ImageTransform {
  int width = 0;     // output size; the image is scaled to cover it, then centre-cropped
  int height = 0;
  int channels = 3;  // 1 (luma, as PIL's "L") or 3 (RGB; alpha is dropped as PIL's convert("RGB"))
  // An image whose decode would take more memory than this, by its declared
  // size (after the DCT downscale used; a progressive JPEG's coefficients
  // are kept at full size), is rejected before any pixel is decoded.
  uint64_t max_decode_bytes = kDefaultMaxDecodeBytes;
};

// Decodes a JPEG, PNG or still WebP (by signature) and applies `t`. JPEGs are decoded
// with libjpeg-turbo's DCT-domain downscaling when the target is at most half
// the size. InvalidArgument naming what is wrong: not an image, truncated or
// corrupt data (libjpeg warnings count as corruption), absurd dimensions, or
// a decode that would take more than t.max_decode_bytes.
Status DecodeImage(const uint8_t* data, size_t size, const ImageTransform& t, Image* out);

// The same without resizing or cropping (for tests and tools); JPEGs at full size.
Status DecodeImageFull(const uint8_t* data, size_t size, int channels, Image* out);

}  // namespace granary
