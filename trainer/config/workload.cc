#include "trainer/config/workload.h"

#include <cmath>

#include "loader/fields.h"

namespace granary {
namespace {

// Images up to this many pixels a side get the convnet; larger ones the resnet.
constexpr int64_t kSmallImage = 32;

// A regression target's mean and std over `split`, as the build recorded
// them (a constant target gets std 1).
Status ReadTargetScale(const Manifest& manifest, const std::string& db, const std::string& split, Workload* w) {
  const auto in_split = manifest.statistics.find(split);
  const FieldStatistics* s = nullptr;
  if (in_split != manifest.statistics.end()) {
    const auto field = in_split->second.find(w->target_field);
    if (field != in_split->second.end()) s = &field->second;
  }
  if (s == nullptr || s->mean.size() != 1 || !std::isfinite(s->mean[0]) || !std::isfinite(s->stddev[0])) {
    return Status::InvalidArgument(db + ": label field '" + w->target_field + "' is a number to predict, and the "
                                   "manifest records no statistics of it for split '" + split + "' (written by "
                                   "prep build or granary.write, it would: rebuild it)");
  }
  w->target_mean = s->mean[0];
  w->target_std = s->stddev[0] > 1e-12 ? s->stddev[0] : 1.0;
  return Status::OK();
}

Status CheckSplit(const Manifest& manifest, const std::string& db, const char* flag, const std::string& name) {
  const SplitInfo* split = manifest.FindSplit(name);
  if (split == nullptr) {
    return Status::InvalidArgument(std::string(flag) + " " + name + ": " + db + " has no such split (it has " +
                                   SplitNames(manifest) + ")");
  }
  if (split->count == 0) {
    return Status::InvalidArgument(std::string(flag) + " " + name + ": split '" + name + "' of " + db +
                                   " is empty (0 samples)");
  }
  return Status::OK();
}

}  // namespace

Status CheckSplits(const Manifest& manifest, const std::string& db, const DataConfig& data, SplitUse use) {
  if (use == SplitUse::kTrain) GRANARY_RETURN_IF_ERROR(CheckSplit(manifest, db, "--train-split", data.train_split));
  if (data.eval_split.empty()) return Status::OK();
  return CheckSplit(manifest, db, "--eval-split", data.eval_split);
}

std::string AutoModel(InputKind kind, const Shape& input_shape) {
  if (kind == InputKind::kFeatures) return "mlp";
  return input_shape[1] <= kSmallImage && input_shape[2] <= kSmallImage ? "convnet" : "resnet";
}

StatusOr<Workload> ResolveWorkload(const Manifest& manifest, const std::string& db, TrainConfig* config) {
  const Schema& schema = manifest.schema;
  Workload w;
  GRANARY_ASSIGN_OR_RETURN(BatchFields fields, ChooseBatchFields(manifest, db, config->data.input_field));
  w.target_field = fields.target;
  const FieldSpec& target = schema.fields[schema.FieldIndex(w.target_field)];
  if (!target.shape.empty()) {
    return Status::InvalidArgument(db + ": label field '" + target.name + "' is " + DTypeName(target.dtype) + " " +
                                   ShapeToString(target.shape) + ": training needs a class or a value per sample");
  }
  w.regression = IsFloatDType(target.dtype);
  w.outputs = w.regression ? 1 : manifest.num_classes;
  if (w.regression) {
    GRANARY_RETURN_IF_ERROR(ReadTargetScale(manifest, db, config->data.train_split, &w));
  } else if (manifest.num_classes < 2) {
    return Status::InvalidArgument(db + ": label field '" + target.name + "' has " +
                                   std::to_string(manifest.num_classes) +
                                   (manifest.num_classes == 1 ? " class" : " classes") + ": training needs at least 2");
  }

  DataConfig& d = config->data;
  d.input_field = fields.input;
  const int index = schema.FieldIndex(d.input_field);
  const FieldSpec& input = schema.fields[index];
  w.input_field = input.name;
  if (input.HasVariableDims() || input.shape.empty()) {
    return Status::InvalidArgument(
        db + ": field '" + input.name + "' has shape " + ShapeToString(input.shape) +
        ": training needs a fixed shape of at least one dim" +
        (input.HasVariableDims() ? std::string(input.IsText() ? " (it is text)" : "") +
                                       "; train's models take images or feature vectors: read such a field in your "
                                       "own script with granary.Dataset (launch runs it on every core)"
                                 : ""));
  }
  w.input_uint8 = input.dtype == DType::kUInt8;
  w.input_shape = BatchedShape(input);
  w.kind = w.input_shape.size() == 3 ? InputKind::kImage : InputKind::kFeatures;
  if (w.kind == InputKind::kFeatures && input.shape.size() != 1) {
    return Status::InvalidArgument(db + ": field '" + input.name + "' has shape " + ShapeToString(input.shape) +
                                   ": training needs an image (C x H x W) or a feature vector");
  }
  if (w.kind == InputKind::kFeatures && (d.mean != 0.0f || d.stddev != 1.0f)) {
    return Status::InvalidArgument("--mean/--std: field '" + input.name + "' of " + db + " is a feature vector " +
                                   ShapeToString(input.shape) +
                                   ": they normalise images (the mlp standardises each feature itself)");
  }

  if (d.eval_split == "auto") {  // test, else val: never the split it trains on (--train-split test)
    d.eval_split = "";
    for (const char* name : {"test", "val"}) {
      if (name != d.train_split && manifest.FindSplit(name) != nullptr) {
        d.eval_split = name;
        break;
      }
    }
  }
  if (config->model.name == "auto") config->model.name = AutoModel(w.kind, w.input_shape);
  if (config->model.channels_last && w.kind != InputKind::kImage) {
    return Status::InvalidArgument("--channels-last: field '" + input.name + "' has shape " +
                                   ShapeToString(input.shape) + ", not an image");
  }
  return w;
}

}  // namespace granary
