#include "trainer/loop/rank_model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "base/mutex.h"
#include "trainer/models/model_card.h"
#include "trainer/models/script.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

std::atomic<bool> dry_forward_left_running{false};

// Where a model file gives another number of classes than the db has: what --new-head does for it.
std::string NewHeadHint(const ModelSpec& spec, const Workload& workload) {
  if (!IsModelFile(spec.name) || workload.regression || spec.new_head) return "";
  return "; " + NewHeadAdvice(workload.outputs);
}

// Where a model file takes RGB images (an ImageNet model) and the db's are
// gray, or the other way round, as the forward's error says: how to make them agree.
std::string ChannelsHint(const std::string& error, const Shape& input) {
  if (input.size() != 3 || error.find(" channels, but got ") == std::string::npos) return "";
  if (input[0] == 1) {
    return "; the db's images are gray (1 channel) and the model takes 3 (RGB): build the db with 3 channels (an "
           "image folder: prep build --channels 3, the default), or write its images as RGB with granary.write "
           "(Image.convert('RGB'), x.repeat(3, 1, 1))";
  }
  return "; the db's images have " + std::to_string(input[0]) + " channels, and the model takes another number: "
         "build the db with the model's (prep build --channels 1 or 3), or write them so with granary.write";
}

}  // namespace

std::string SavedInputShapeDifference(const TrainConfig& config, const Workload& workload) {
  if (!IsModelFile(config.model.name)) return "";
  StatusOr<std::optional<ModelCard>> card = ReadModelCard(config.model.name);  // (its errors: ApplySavedModelsInput's)
  if (!card.ok() || !card->has_value()) return "";
  return InputShapeDifference(*card.value(), config.model.name, workload.input_field, workload.input_shape);
}

void WarnOfSavedInputShape(const TrainConfig& config, const Workload& workload) {
  if (config.model.new_head) return;  // a new task, often at a new size
  const std::string size = SavedInputShapeDifference(config, workload);
  if (size.empty()) return;
  std::fprintf(stderr, "train: warning: %s (the model takes these inputs, pooling adaptively, but sees their objects "
               "at another scale than it learnt them: it may score lower than at its own size)\n", size.c_str());
}

bool DryForwardLeftRunning() { return dry_forward_left_running.load(); }

ModelSpec SpecFor(const ModelConfig& m, const Workload& workload) {
  ModelSpec spec;
  spec.name = m.name;
  spec.input = workload.input_shape;
  spec.classes = workload.outputs;
  spec.regression = workload.regression;
  spec.target_mean = workload.target_mean;
  spec.target_std = workload.target_std;
  spec.dropout = m.dropout;
  spec.width = m.width;
  spec.new_head = m.new_head;
  spec.freeze = m.freeze;
  return spec;
}

std::string ModelCardOf(const TrainConfig& config, const Workload& workload, const Manifest& manifest) {
  ModelCard card;
  card.input_field = workload.input_field;
  card.input_shape = workload.input_shape;
  card.input_scale = workload.input_uint8 ? 1.0 / 255 : 1.0;
  card.mean = config.data.mean;
  card.stddev = config.data.stddev;
  card.classes = manifest.class_names;
  if (auto names = manifest.element_names.find(workload.input_field); names != manifest.element_names.end()) {
    card.input_names = names->second;
  }
  if (workload.regression) card.regression_target = workload.target_field;
  card.db_content_hash = manifest.content_hash;
  return ModelCardJson(card);
}

Status ApplySavedModelsInput(const Manifest& manifest, TrainConfig* config) {
  if (!IsModelFile(config->model.name)) return Status::OK();
  const int label = manifest.schema.FieldIndex(manifest.label_field);
  const bool db_regression = label >= 0 && IsFloatDType(manifest.schema.fields[label].dtype);
  if (config->model.new_head && db_regression) {
    return Status::InvalidArgument("--new-head: gives a model one output per class, and the db's label '" +
                                   manifest.label_field + "' is a number to predict");
  }
  GRANARY_ASSIGN_OR_RETURN(const std::optional<ModelCard> card, ReadModelCard(config->model.name));
  if (!card.has_value()) return Status::OK();
  if (label >= 0 && db_regression != !card->regression_target.empty()) {
    return Status::InvalidArgument(
        "--model " + config->model.name + ": " +
        (db_regression ? "predicts " + std::to_string(card->classes.size()) + " classes (its card says)"
                       : "predicts a number, regression target '" + card->regression_target + "' (its card says)") +
        "; the db's label '" + manifest.label_field + "' is " +
        (db_regression ? "a number to predict" : std::to_string(manifest.num_classes) + " classes"));
  }
  GRANARY_RETURN_IF_ERROR(ApplyModelCard(*card, config->model.name, &config->data.mean, &config->data.stddev));
  if (config->data.input_field.empty() && manifest.schema.FieldIndex(card->input_field) >= 0) {
    config->data.input_field = card->input_field;
  }
  return CheckModelMeetsDb(*card, config->model.name, manifest,
                           config->data.input_field.empty() ? card->input_field : config->data.input_field,
                           config->model.new_head);
}

Status CheckModelFits(const TrainConfig& config, const Workload& workload, ModelUse use, ModelBytes* bytes) {
  const std::string context = config.data.db + ": field '" + workload.input_field + "'";
  ModelSpec spec = SpecFor(config.model, workload);
  const int64_t classes = workload.outputs;
  StatusOr<std::shared_ptr<Classifier>> model = CatchTorchOr("building the model", [&] { return CreateModel(spec); });
  if (!model.ok()) return model.status().WithContext(context);
  if (bytes != nullptr) {
    for (const torch::Tensor& p : model.value()->parameters()) bytes->parameters += p.nbytes();
    for (const torch::Tensor& b : model.value()->buffers()) bytes->buffers += b.nbytes();
  }
  if (use == ModelUse::kTrain) {
    const auto parameters = model.value()->parameters();
    if (std::none_of(parameters.begin(), parameters.end(), [](const torch::Tensor& p) { return p.requires_grad(); })) {
      return Status::InvalidArgument("--model " + spec.name +
                                     ": has no trainable parameters (a model saved for inference only? run it with --eval-only)");
    }
  }
  // A dry forward of a batch of two: the model takes the db's input and
  // gives one logit per class.
  Shape batch = {2};
  batch.insert(batch.end(), spec.input.begin(), spec.input.end());
  const std::string shapes = "model " + spec.name + " on input " + ShapeToString(batch);
  // On a thread of its own, bounded by --timeout: a model's forward may loop.
  // Past it the thread is left running and the caller must end the process.
  struct DryRun {
    Mutex mutex;
    CondVar done_cv;
    bool done GRANARY_GUARDED_BY(mutex) = false;
    Status ran GRANARY_GUARDED_BY(mutex);
    torch::Tensor logits;  // the thread's until `done`, then the caller's
  };
  auto dry = std::make_shared<DryRun>();
  std::thread([dry, net = model.value(), batch] {
    Status ran = CatchTorch("dry forward", [&] {
      torch::NoGradGuard no_grad;
      net->eval();
      dry->logits = net->forward(torch::zeros(batch));
    });
    MutexLock lock(&dry->mutex);
    dry->ran = ran;
    dry->done = true;
    dry->done_cv.NotifyAll();
  }).detach();
  MutexLock lock(&dry->mutex);
  if (!dry->done_cv.WaitFor(dry->mutex, std::chrono::seconds(config.dist.timeout_s), [&] {
        dry->mutex.AssertHeld();
        return dry->done;
      })) {
    dry_forward_left_running.store(true);
    return Status::FailedPrecondition(context + ": " + shapes + ": the forward did not return within --timeout " +
                                      std::to_string(config.dist.timeout_s) + " s (does the model loop?)");
  }
  if (!dry->ran.ok()) {
    const Status failed = dry->ran.WithContext(context + ": " + shapes);
    std::string hint = ChannelsHint(dry->ran.message(), spec.input);
    if (std::string size = SavedInputShapeDifference(config, workload); hint.empty() && !size.empty()) {
      hint = ": " + size;
    }
    return hint.empty() ? failed : Status::InvalidArgument(failed.message() + hint);
  }
  const torch::Tensor logits = dry->logits;
  const Shape want = {2, classes};
  // A value to predict may come as N x 1 or, squeezed as PyTorch scripts often return it for MSELoss, as N.
  const bool squeezed_value = workload.regression && logits.sizes().vec() == Shape{2};
  if (logits.sizes().vec() != want && !squeezed_value) {
    return Status::InvalidArgument(context + ": " + shapes + " gives " + ShapeToString(logits.sizes().vec()) +
                                   ", training needs " + ShapeToString(want) + " (" +
                                   (workload.regression ? "or [2]: one value to predict"
                                                        : std::to_string(classes) + " classes") +
                                   ")" + NewHeadHint(spec, workload));
  }
  // The loss (log_softmax) has no kernel for half or integer logits on CPU.
  const auto dtype = logits.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kDouble && dtype != torch::kBFloat16) {
    return Status::InvalidArgument(context + ": " + shapes + " gives " + std::string(c10::toString(dtype)) +
                                   " logits: the loss needs float32 (return logits.float())");
  }
  return Status::OK();
}

StatusOr<RankModel> BuildRankModel(const TrainConfig& c, const ModelSpec& spec, const RestoreWeights& restore) {
  torch::manual_seed(c.optim.seed);
  RankModel m;
  m.spec = spec;
  StatusOr<std::shared_ptr<Classifier>> model = CatchTorchOr("building the model", [&] { return CreateModel(spec); });
  if (!model.ok()) return model.status().WithContext(c.data.db);
  m.net = model.value();
  m.precision = Precision::Create(c.model);
  if (restore) GRANARY_RETURN_IF_ERROR(restore(*m.net));
  // After the restore, which takes the saved tensors' layout.
  GRANARY_RETURN_IF_ERROR(CatchTorch("channels-last weights", [&] { m.precision.Prepare(*m.net); }));
  return m;
}

uint64_t ParameterCount(const torch::nn::Module& net) {
  uint64_t n = 0;
  for (const torch::Tensor& p : net.parameters()) n += static_cast<uint64_t>(p.numel());
  return n;
}

}  // namespace granary
