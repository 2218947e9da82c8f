// The model of a run: what --model builds for the db's input, checked by
// the launcher before any rank starts (CheckModelFits) and built by every
// rank (BuildRankModel). Training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"

namespace granary {

// The model to build for `workload`: one output per class, or one value to
// predict.
ModelSpec SpecFor(const ModelConfig& m, const Workload& workload);

// What a model is checked for: training needs a parameter to train.
enum class ModelUse { kTrain, kInfer };  // kInfer: train --eval-only

// What a model holds, in bytes: about what a file of its state takes.
struct ModelBytes {
  uint64_t parameters = 0;
  uint64_t buffers = 0;  // batch norm's running statistics, ...
};

// OK if `config.model` can be built for `workload` and a dry forward of two
// samples gives one floating-point logit per class (bounded by --timeout: a
// model that loops is named; its forward then still runs on a thread, so
// the process must end without static destructors: DryForwardLeftRunning).
// Else
// InvalidArgument or FailedPrecondition naming the db, the model and the
// shapes, or, for kTrain, that it has no trainable parameter (an INT8 model).
// With `bytes`, also what the model holds (for what its state will take on disk).
Status CheckModelFits(const TrainConfig& config, const Workload& workload, ModelUse use, ModelBytes* bytes = nullptr);

// "" unless --model is a saved model whose card records inputs of another
// shape than the db's (InputShapeDifference): CheckModelFits's hint where
// the forward fails, the caller's warning where it takes them.
std::string SavedInputShapeDifference(const TrainConfig& config, const Workload& workload);
// That difference, where the model's forward took the db's inputs, as a
// warning on stderr (not with --new-head: a new task, often at a new size).
void WarnOfSavedInputShape(const TrainConfig& config, const Workload& workload);

// True once a dry forward of CheckModelFits outlived --timeout: its thread
// still runs LibTorch, so main must end the process at once (ExitAtOnce:
// LibTorch's static destructors under it crashed 1 exit in 3).
bool DryForwardLeftRunning();

// What the saved model expects of its input (models/model_card.h), as the
// JSON --save and --quantize's INT8 file record.
std::string ModelCardOf(const TrainConfig& config, const Workload& workload, const Manifest& manifest);

// With --model FILE.pt of a model granary saved: its recorded input
// normalisation (and input field, if `manifest`'s schema has it and none
// was named) into `config` (models/model_card.h); InvalidArgument for a
// --mean/--std that differs, or a model of a regression target on a db of
// classes (or the other way round). Nothing for a file without a card.
Status ApplySavedModelsInput(const Manifest& manifest, TrainConfig* config);

// A rank's model, in its precision.
struct RankModel {
  std::shared_ptr<Classifier> net;
  Precision precision;
  ModelSpec spec;  // what it was built from
};

// The trainable values of `net` (its parameters' elements).
uint64_t ParameterCount(const torch::nn::Module& net);

// Puts saved weights (and the shapes they have) into a model just built.
using RestoreWeights = std::function<Status(Classifier& net)>;

// `spec` built with the same initial weights on every rank (seeded from
// config.optim.seed; rank 0's broadcast follows when the ranks join), in
// config.model's precision, with `restore`'s weights if given (a resumed
// run's).
StatusOr<RankModel> BuildRankModel(const TrainConfig& config, const ModelSpec& spec,
                                   const RestoreWeights& restore = nullptr);

}  // namespace granary
