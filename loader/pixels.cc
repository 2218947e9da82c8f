#include "loader/pixels.h"

#include <algorithm>
#include <cstring>

namespace granary {

void ToFloat(DType dtype, const uint8_t* src, size_t count, float scale, float mean, float inv_std, float* dst) {
  auto convert = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, src + i * sizeof(T), sizeof(T));
      dst[i] = (static_cast<float>(v) * scale - mean) * inv_std;
    }
  };
  VisitDType(dtype, convert);
}

void HwcToChw(const uint8_t* src, const Shape& hwc, float scale, float mean, float inv_std, float* dst) {
  const size_t plane = static_cast<size_t>(hwc[0] * hwc[1]);
  const size_t channels = static_cast<size_t>(hwc[2]);
  for (size_t c = 0; c < channels; ++c) {
    float* out = dst + c * plane;
    for (size_t p = 0; p < plane; ++p) out[p] = (static_cast<float>(src[p * channels + c]) * scale - mean) * inv_std;
  }
}

void HwcToChwShifted(const uint8_t* src, const Shape& hwc, const AugmentPlan& plan, float scale,
                     const std::vector<float>& means, const std::vector<float>& inv_stds, float* dst) {
  const int h = static_cast<int>(hwc[0]), w = static_cast<int>(hwc[1]), channels = static_cast<int>(hwc[2]);
  for (int c = 0; c < channels; ++c) {
    const float m = means[c], is = inv_stds[c], zero = -m * is;
    float* out = dst + static_cast<size_t>(c) * h * w;
    for (int y = 0; y < h; ++y) {
      const int sy = SourceRow(plan, y);
      float* row = out + static_cast<size_t>(y) * w;
      if (sy < 0 || sy >= h) {
        std::fill(row, row + w, zero);
        continue;
      }
      const uint8_t* in = src + static_cast<size_t>(sy) * w * channels + c;
      for (int x = 0; x < w; ++x) {
        const int sx = SourceColumn(plan, w, x);
        row[x] = (sx >= 0 && sx < w) ? (static_cast<float>(in[sx * channels]) * scale - m) * is : zero;
      }
    }
  }
}

void CopyImage(const uint8_t* src, int channels, int h, int w, bool hwc, const AugmentPlan& plan, bool channels_last,
               uint8_t* dst) {
  for (int c = 0; c < channels; ++c) {
    for (int y = 0; y < h; ++y) {
      const int sy = SourceRow(plan, y);
      for (int x = 0; x < w; ++x) {
        const int sx = SourceColumn(plan, w, x);
        uint8_t v = 0;
        if (sy >= 0 && sy < h && sx >= 0 && sx < w) {
          v = hwc ? src[(static_cast<size_t>(sy) * w + sx) * channels + c]
                  : src[(static_cast<size_t>(c) * h + sy) * w + sx];
        }
        dst[channels_last ? (static_cast<size_t>(y) * w + x) * channels + c : (static_cast<size_t>(c) * h + y) * w + x] = v;
      }
    }
  }
}

void ChwToHwc(const Shape& chw, float* image, std::vector<float>* scratch) {
  const size_t c = static_cast<size_t>(chw[0]), plane = static_cast<size_t>(chw[1] * chw[2]);
  scratch->assign(image, image + c * plane);
  for (size_t ch = 0; ch < c; ++ch) {
    for (size_t p = 0; p < plane; ++p) image[p * c + ch] = (*scratch)[ch * plane + p];
  }
}

}  // namespace granary
