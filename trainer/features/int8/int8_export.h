// train --quantize int8, a hook of rank 0 alone after the run (no
// collective): rank 0 writes the trained model as TorchScript, calibrates it
// on batches of the training split (a rank's batch size, in the run's
// shuffled order, unaugmented), quantizes it (trainer/models/quantize.h),
// evaluates both models on the eval split at its threads, tells the report,
// and writes FILE.int8.pt beside --save FILE.pt. Training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/db.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/features/feature.h"
#include "trainer/models/registry.h"
#include "trainer/report/observer.h"

namespace granary {

// The trained model against its INT8 quantization (train --quantize int8),
// both evaluated on the eval split by rank 0 at its threads.
struct QuantizedReport {
  std::string engine;  // LibTorch's quantized engine: onednn or qnnpack
  int threads = 0;     // intra-op threads of the inference measurement
  uint64_t calibration_samples = 0;
  uint64_t eval_samples = 0;
  double fp32_accuracy = 0, int8_accuracy = 0;
  double fp32_loss = 0, int8_loss = 0;                    // mean over the samples
  // Inference: the median of five forwards of the eval split's first batch
  // (256), the two models alternated; fp32 frozen (BatchNorm folded).
  double fp32_samples_per_s = 0, int8_samples_per_s = 0;
  uint64_t fp32_bytes = 0, int8_bytes = 0;                // saved as TorchScript
  int int8_layers = 0;
  std::vector<std::string> fp32_layers;  // weighted ops left in fp32, each with why
  std::string path;                      // where the INT8 model was written ("" nowhere)
};

// Where the INT8 model of `save` goes: "model.pt" -> "model.int8.pt"
// (".pth" alike); "" for "".
std::string Int8Path(const std::string& save);

// Before any rank starts: the run's model, untrained, through the passes on
// a batch of zeros of the db's shape. The layers that would stay fp32, each
// with why (none without --quantize int8); InvalidArgument naming the model
// if no layer would be quantized, the run evaluates nothing to compare on or
// its target is a value to predict (no accuracy); FailedPrecondition with
// LibTorch's message if a pass fails.
StatusOr<std::vector<std::string>> CheckQuantizable(const TrainConfig& config, const Workload& workload);

// The trained `net` quantized and measured (see above); the INT8 file is
// written only if config.output.save is set. Errors name the step that failed.
StatusOr<QuantizedReport> QuantizeTrained(const TrainConfig& config, const DbReader& db, const Workload& workload,
                                          const Classifier& net);

// The feature: checked before any rank starts (CheckQuantizable, the
// layers that will stay fp32 named), its file checked with every output,
// and the hook above on rank 0.
std::unique_ptr<Feature> MakeInt8ExportFeature();

}  // namespace granary
