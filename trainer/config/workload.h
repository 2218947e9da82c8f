// Workload: what a run trains on, decided from the db's manifest before any
// rank starts, the same way in every process: which field is the input and
// which the target, what kind of input it is, which split is evaluated, and
// which model `--model auto` means. ResolveWorkload writes its choices back
// into the config, so what is printed (and compared on resume) is what runs.
#pragma once

#include <string>

#include "base/status.h"
#include "store/manifest.h"
#include "trainer/config/config.h"

namespace granary {

enum class InputKind {
  kImage,     // C x H x W (stored CHW or HWC), uint8 scaled to [0, 1] or float
  kFeatures,  // a vector of numbers (CSV): standardised per feature by the model
};

struct Workload {
  std::string input_field;
  std::string target_field;
  InputKind kind = InputKind::kImage;
  Shape input_shape;         // one sample as batched: C x H x W, or {features}
  bool input_uint8 = false;  // scaled by 1/255 when batched
  // The model's outputs: one per class, or one value for a regression target
  // (a float label field, prep build --regression), which is fitted by the
  // squared error in units of its std over the train split (from the
  // manifest's statistics).
  int64_t outputs = 0;
  bool regression = false;
  double target_mean = 0, target_std = 1;
};

// Resolves `config`'s automatic choices against `manifest`:
//   data.input_field ""  -> "image" if the schema has it, else the only field
//                           besides the label;
//   data.eval_split "auto" -> "test", else "val", else "" (no evaluation);
//   model.name "auto"    -> mlp for feature vectors, convnet for images up to
//                           32 px, resnet above.
// InvalidArgument naming the db, the field and its shape when the db cannot be
// trained: no label field, a label that is no scalar (or a float one with no
// statistics recorded), fewer than 2 classes, an input
// that is not numeric or not of a fixed shape. (Whether the model fits the
// input is CheckModelFits's question, trainer/loop/rank_model.h.)
StatusOr<Workload> ResolveWorkload(const Manifest& manifest, const std::string& db, TrainConfig* config);

// What a run reads of the db: training reads --train-split and (if set)
// --eval-split, an evaluation only --eval-split. InvalidArgument naming the
// flag and the db when such a split is missing or has no sample, so a run
// finds out before any rank starts (not after training).
enum class SplitUse { kTrain, kEvaluate };
Status CheckSplits(const Manifest& manifest, const std::string& db, const DataConfig& data, SplitUse use);

// The model `--model auto` picks for an input of this kind and shape.
std::string AutoModel(InputKind kind, const Shape& input_shape);

}  // namespace granary
