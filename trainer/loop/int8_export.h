// train --quantize int8, a hook of rank 0 alone after the run (no
// collective): rank 0 writes the trained model as TorchScript, calibrates it
// on batches of the training split (a rank's batch size, in the run's
// shuffled order, unaugmented), quantizes it (trainer/models/quantize.h),
// evaluates both models on the eval split at its threads, tells the report,
// and writes FILE.int8.pt beside --save FILE.pt. Training thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/db.h"
#include "store/status.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/loop/hook.h"
#include "trainer/models/registry.h"
#include "trainer/report/observer.h"

namespace granary {

// Where the INT8 model of `save` goes: "model.pt" -> "model.int8.pt"
// (".pth" alike); "" for "".
std::string Int8Path(const std::string& save);

// Before any rank starts: the run's model, untrained, through the passes on
// a batch of zeros of the db's shape. The layers that would stay fp32, each
// with why (none without --quantize int8); InvalidArgument naming the model
// if no layer would be quantized or the run evaluates nothing to compare on;
// FailedPrecondition with LibTorch's message if a pass fails.
StatusOr<std::vector<std::string>> CheckQuantizable(const TrainConfig& config, const Workload& workload,
                                                    int64_t classes);

// The trained `net` quantized and measured (see above); the INT8 file is
// written only if config.output.save is set. Errors name the step that failed.
StatusOr<QuantizedReport> QuantizeTrained(const TrainConfig& config, const DbReader& db, const Workload& workload,
                                          const Classifier& net);

class Int8Export : public RunHook {
 public:
  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override;
};

}  // namespace granary
