#include "preprocess/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace granary {
namespace {

// Separable triangle-filter resampling, widened by the scale factor when
// shrinking (antialiased, like PIL's BILINEAR). Debian 12's stb_image_resize
// aborts on an assertion for some size ratios, so this is our own.

struct Taps {
  std::vector<int> first;     // first source index per output index
  std::vector<int> count;     // taps per output index
  std::vector<float> weight;  // count[i] weights per output index, max_taps apart
  int max_taps = 0;
};

Taps MakeTaps(int in_size, int out_size) {
  Taps t;
  const double scale = static_cast<double>(out_size) / in_size;
  const double support = scale < 1 ? 1.0 / scale : 1.0;  // triangle radius in source pixels
  t.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weight.assign(static_cast<size_t>(out_size) * t.max_taps, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) / scale;
    int lo = std::max(0, static_cast<int>(std::floor(center - support)));
    int hi = std::min(in_size, static_cast<int>(std::ceil(center + support)));
    hi = std::min(hi, lo + t.max_taps);
    double sum = 0;
    float* w = &t.weight[static_cast<size_t>(i) * t.max_taps];
    for (int j = lo; j < hi; ++j) {
      const double d = std::abs((j + 0.5 - center) / support);
      w[j - lo] = d < 1 ? static_cast<float>(1 - d) : 0.0f;
      sum += w[j - lo];
    }
    if (sum <= 0) {  // no tap inside the filter: take the nearest pixel
      lo = std::clamp(static_cast<int>(center), 0, in_size - 1);
      hi = lo + 1;
      w[0] = 1.0f;
      sum = 1;
    }
    for (int j = 0; j < hi - lo; ++j) w[j] = static_cast<float>(w[j] / sum);
    t.first[i] = lo;
    t.count[i] = hi - lo;
  }
  return t;
}

uint8_t ToByte(float v) { return static_cast<uint8_t>(std::clamp(v + 0.5f, 0.0f, 255.0f)); }

// Resamples the w x h region at `src` (row stride `stride` bytes) to out_w x
// out_h. C is the channel count, fixed at compile time so the tap loops unroll.
// Vertical pass first: each output row sums a few whole source rows, a loop
// the compiler vectorises; the horizontal pass then runs on out_h rows only.
template <int C>
void ResampleC(const uint8_t* src, int w, int h, size_t stride, int out_w, int out_h, uint8_t* dst) {
  const Taps tx = MakeTaps(w, out_w), ty = MakeTaps(h, out_h);
  const size_t in_len = static_cast<size_t>(w) * C;
  thread_local std::vector<float> column;  // one output row before the horizontal pass, w * C
  column.resize(in_len);
  for (int y = 0; y < out_h; ++y) {
    float* acc = column.data();
    std::fill(acc, acc + in_len, 0.0f);
    const float* wt = &ty.weight[static_cast<size_t>(y) * ty.max_taps];
    for (int k = 0; k < ty.count[y]; ++k) {
      const uint8_t* in = src + (ty.first[y] + k) * stride;
      const float wk = wt[k];
      for (size_t i = 0; i < in_len; ++i) acc[i] += wk * static_cast<float>(in[i]);
    }
    uint8_t* out = dst + static_cast<size_t>(y) * out_w * C;
    for (int x = 0; x < out_w; ++x) {
      const float* wx = &tx.weight[static_cast<size_t>(x) * tx.max_taps];
      const float* p = acc + static_cast<size_t>(tx.first[x]) * C;
      float a[C] = {};
      for (int k = 0; k < tx.count[x]; ++k, p += C) {
        for (int c = 0; c < C; ++c) a[c] += wx[k] * p[c];
      }
      for (int c = 0; c < C; ++c) out[x * C + c] = ToByte(a[c]);
    }
  }
}

}  // namespace

void Resample(const uint8_t* src, int w, int h, size_t stride, int channels, int out_w, int out_h, uint8_t* dst) {
  if (channels == 1) {
    ResampleC<1>(src, w, h, stride, out_w, out_h, dst);
  } else {
    ResampleC<3>(src, w, h, stride, out_w, out_h, dst);
  }
}

}  // namespace granary
