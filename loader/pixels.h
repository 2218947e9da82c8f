// The loader's pixel and value kernels: stored samples converted to the
// float (or uint8) layouts a batch holds, normalised and augmented on the
// way. Stateless; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "loader/augment.h"
#include "store/schema.h"

namespace granary {

// Converts `count` little-endian values of `dtype` at `src` to float:
// (value x scale - mean) x inv_std.
void ToFloat(DType dtype, const uint8_t* src, size_t count, float scale, float mean, float inv_std, float* dst);

// uint8 H x W x C -> float C x H x W, normalised like ToFloat.
void HwcToChw(const uint8_t* src, const Shape& hwc, float scale, float mean, float inv_std, float* dst);

// uint8 H x W x C -> float C x H x W with a plan's shift (zero outside) and
// flip applied, normalised per channel: ApplyAugment fused into the conversion.
void HwcToChwShifted(const uint8_t* src, const Shape& hwc, const AugmentPlan& plan, float scale,
                     const std::vector<float>& means, const std::vector<float>& inv_stds, float* dst);

// A uint8 C x H x W image (or H x W x C when `hwc`) copied with a plan's shift
// (zero outside) and flip into C x H x W, or H x W x C when `channels_last`.
void CopyImage(const uint8_t* src, int channels, int h, int w, bool hwc, const AugmentPlan& plan, bool channels_last,
               uint8_t* dst);

// C x H x W floats at `image` rearranged in place to H x W x C.
void ChwToHwc(const Shape& chw, float* image, std::vector<float>* scratch);

// A scalar of `dtype` at `src` as a T: a class as int64, a value to
// predict as float.
template <typename T>
T ScalarAs(DType dtype, const uint8_t* src) {
  return VisitDType(dtype, [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, src, sizeof(v));
    return static_cast<T>(v);
  });
}

}  // namespace granary
