#include "loader/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "store/splitmix64.h"

namespace granary {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t key) : state_(key) {}
  uint64_t Next() { return state_.Next(); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int Below(int bound) { return static_cast<int>(Uniform() * bound); }

 private:
  SplitMix64 state_;
};

// Bilinear sample of plane `p` (h x w) at (y, x), edges clamped.
float Bilinear(const float* p, int h, int w, double y, double x) {
  y = std::clamp(y, 0.0, h - 1.0);
  x = std::clamp(x, 0.0, w - 1.0);
  const int y0 = static_cast<int>(y), x0 = static_cast<int>(x);
  const int y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
  const float fy = static_cast<float>(y - y0), fx = static_cast<float>(x - x0);
  const float top = p[y0 * w + x0] * (1 - fx) + p[y0 * w + x1] * fx;
  const float bottom = p[y1 * w + x0] * (1 - fx) + p[y1 * w + x1] * fx;
  return top * (1 - fy) + bottom * fy;
}

}  // namespace

StatusOr<AugmentOptions> ParseAugment(const std::string& comma_list) {
  AugmentOptions options;
  size_t begin = 0;
  while (begin < comma_list.size()) {
    size_t end = comma_list.find(',', begin);
    if (end == std::string::npos) end = comma_list.size();
    const std::string name = comma_list.substr(begin, end - begin);
    if (name == "flip") {
      options.flip = true;
    } else if (name == "crop") {
      options.crop_padding = 4;
    } else if (name == "rrc") {
      options.random_resized_crop = true;
    } else {
      return Status::InvalidArgument("--augment " + name + ": expected flip, crop or rrc");
    }
    begin = end + 1;
  }
  return options;
}

uint64_t AugmentKey(uint64_t seed, uint64_t epoch, uint64_t index) {
  return SplitMix64Mix(SplitMix64Mix(seed ^ 0x6A09E667F3BCC909ULL) ^ SplitMix64Mix(epoch + 0x3C6EF372FE94F82BULL) ^
                       index);
}

AugmentPlan PlanAugment(const AugmentOptions& o, uint64_t key, int height, int width) {
  Rng rng(key);
  AugmentPlan plan;
  if (o.random_resized_crop) {
    // torchvision's RandomResizedCrop: 10 tries at an area and log-uniform
    // aspect ratio that fit, else the whole image.
    plan.resized_crop = true;
    plan.box_h = height, plan.box_w = width;
    const double pixels = static_cast<double>(height) * width;
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double area = pixels * (o.min_scale + (1.0 - o.min_scale) * rng.Uniform());
      const double ratio = std::exp(std::log(3.0 / 4) + (std::log(4.0 / 3) - std::log(3.0 / 4)) * rng.Uniform());
      const double w = std::round(std::sqrt(area * ratio)), h = std::round(std::sqrt(area / ratio));
      if (w >= 1 && h >= 1 && w <= width && h <= height) {
        plan.box_w = w, plan.box_h = h;
        plan.box_y = rng.Below(static_cast<int>(height - h) + 1);
        plan.box_x = rng.Below(static_cast<int>(width - w) + 1);
        break;
      }
    }
  }
  if (o.crop_padding > 0) {
    const int p = o.crop_padding;
    plan.shift_y = rng.Below(2 * p + 1) - p;
    plan.shift_x = rng.Below(2 * p + 1) - p;
  }
  plan.flip = o.flip && (rng.Next() & 1);
  return plan;
}

void ApplyAugment(const AugmentPlan& plan, int channels, int height, int width, float* image,
                  std::vector<float>* scratch) {
  const size_t plane = static_cast<size_t>(height) * width;
  scratch->resize(plane * channels);
  float* tmp = scratch->data();
  if (plan.resized_crop) {
    for (int c = 0; c < channels; ++c) {
      const float* src = image + c * plane;
      float* dst = tmp + c * plane;
      for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
          // Pixel centres map onto the box (align_corners=False).
          const double sy = plan.box_y + (y + 0.5) * plan.box_h / height - 0.5;
          const double sx = plan.box_x + (x + 0.5) * plan.box_w / width - 0.5;
          dst[y * width + x] = Bilinear(src, height, width, sy, sx);
        }
      }
    }
    std::memcpy(image, tmp, plane * channels * sizeof(float));
  }
  if (plan.shift_y != 0 || plan.shift_x != 0 || plan.flip) {
    for (int c = 0; c < channels; ++c) {
      const float* src = image + c * plane;
      float* dst = tmp + c * plane;
      for (int y = 0; y < height; ++y) {
        const int sy = SourceRow(plan, y);
        for (int x = 0; x < width; ++x) {
          const int sx = SourceColumn(plan, width, x);
          dst[y * width + x] = (sy >= 0 && sy < height && sx >= 0 && sx < width) ? src[sy * width + sx] : 0.0f;
        }
      }
    }
    std::memcpy(image, tmp, plane * channels * sizeof(float));
  }
}

}  // namespace granary
