// Training-time augmentation of CHW float images, random but a pure function
// of (seed, epoch, sample index): the same run gives the same batches whatever
// the thread count or timing. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

struct AugmentOptions {
  // Random crop of the original size after zero-padding each side by this
  // many pixels (CIFAR style); 0: off.
  int crop_padding = 0;
  // Random-resized crop: an area fraction in [min_scale, 1] and aspect ratio
  // in [3/4, 4/3], resized (bilinear) back to the image size.
  bool random_resized_crop = false;
  float min_scale = 0.08f;
  // Horizontal flip with probability 1/2.
  bool flip = false;

  bool any() const { return crop_padding > 0 || random_resized_crop || flip; }
};

// Options from a comma list of "flip", "crop" (padding 4) and "rrc" (the
// loader tools' --augment; "" for none); InvalidArgument naming the flag
// and the unknown name otherwise.
StatusOr<AugmentOptions> ParseAugment(const std::string& comma_list);

// The random stream of one sample in one epoch.
uint64_t AugmentKey(uint64_t seed, uint64_t epoch, uint64_t index);

// The random choices for one image, drawn in a fixed order from its key:
// first a random-resized-crop box, then a padded-crop shift, then a flip.
struct AugmentPlan {
  bool resized_crop = false;
  double box_y = 0, box_x = 0, box_h = 0, box_w = 0;  // source region, in pixels
  int shift_y = 0, shift_x = 0;  // output (y, x) reads input (y + shift_y, x + shift_x), zero outside
  bool flip = false;             // mirror the result horizontally
};
AugmentPlan PlanAugment(const AugmentOptions& options, uint64_t key, int height, int width);

// A plan's shift and flip as one rule: output pixel (y, x) of a w-wide image
// reads input row SourceRow(plan, y) and column SourceColumn(plan, w, x), and
// is zero where those fall outside the image. ApplyAugment and the loader's
// fused conversions all use it.
inline int SourceRow(const AugmentPlan& plan, int y) { return y + plan.shift_y; }
inline int SourceColumn(const AugmentPlan& plan, int w, int x) { return (plan.flip ? w - 1 - x : x) + plan.shift_x; }

// Applies `plan` to the C x H x W image at `image` in place. `scratch` is
// reused between calls.
void ApplyAugment(const AugmentPlan& plan, int channels, int height, int width, float* image,
                  std::vector<float>* scratch);

}  // namespace granary
