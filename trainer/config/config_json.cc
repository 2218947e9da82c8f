// TrainConfig as JSON (trainer/config/config.h): written into checkpoints
// and `--json`, read back strictly (unknown or out-of-range members refused),
// compared field by field, and the recipe every node must agree on.
#include "trainer/config/config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace granary {

// The closed choices (choices.h) as their names; a name that is none of
// them is refused (nlohmann's own enum mapping would take it for the first).
template <typename E>
void ChoiceToJson(nlohmann::json& j, E value) {
  j = NameOf(value);
}
template <typename E>
void ChoiceFromJson(const nlohmann::json& j, E& value) {
  const std::string text = j.get<std::string>();
  if (!ParseChoice(text, &value)) {
    throw std::invalid_argument("'" + text + "' is not one of " + ChoiceNames(value));
  }
}
#define GRANARY_CHOICE_JSON(E)                                              \
  void to_json(nlohmann::json& j, E value) { ChoiceToJson(j, value); }      \
  void from_json(const nlohmann::json& j, E& value) { ChoiceFromJson(j, value); }
GRANARY_CHOICE_JSON(ComputeType)
GRANARY_CHOICE_JSON(LrScaling)
GRANARY_CHOICE_JSON(SyncMethod)
GRANARY_CHOICE_JSON(Compression)
GRANARY_CHOICE_JSON(Backend)
GRANARY_CHOICE_JSON(Quantize)
#undef GRANARY_CHOICE_JSON

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DataConfig, db, train_split, eval_split, input_field, loader_threads,
                                                prefetch, shuffle, drop_last, skip_corrupt, augment, mean, stddev,
                                                synthetic, probe_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ModelConfig, name, width, dropout, precision, channels_last,
                                                new_head, freeze)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(OptimConfig, optimizer, lr, momentum, nesterov, weight_decay, epochs,
                                                batch_size, accum, seed, schedule, warmup_epochs, lr_scaling,
                                                base_batch, label_smoothing, stop_at_accuracy,
                                                class_weights)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SyncConfig, method, bucket_mb, compress, powersgd_rank,
                                                powersgd_warmup)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DistConfig, ranks, threads, nnodes, node_rank, host, port, iface,
                                                timeout_s, oversubscribe, pin, backend)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(OutputConfig, save, metrics, log_every, report)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CheckpointConfig, dir, every, keep, resume)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ShrinkConfig, quantize, calibration_batches, prune, prune_epochs)

namespace {

nlohmann::json ToJsonValue(const TrainConfig& c) {
  return {{"data", c.data},           {"model", c.model},   {"optim", c.optim},
          {"sync", c.sync},           {"dist", c.dist},     {"checkpoint", c.checkpoint},
          {"output", c.output},       {"shrink", c.shrink}};
}

// Members of `j` (an object) that `defaults` does not have, recursively.
void UnknownMembers(const nlohmann::json& j, const nlohmann::json& defaults, const std::string& prefix,
                    std::vector<std::string>* out) {
  for (const auto& [key, value] : j.items()) {
    if (!defaults.contains(key)) {
      out->push_back(prefix + key);
    } else if (value.is_object() && defaults[key].is_object()) {
      UnknownMembers(value, defaults[key], prefix + key + ".", out);
    }
  }
}

// The first member of `j` whose number does not fit the C++ member it sets,
// judged by the defaults' JSON: an integer member (a signed one is an int or
// a bounded int64_t) takes only a JSON integer within int32 (any unsigned
// one for an unsigned member), a floating-point member a number within
// float's range. nlohmann would cast anything else, some of it undefined
// behaviour. "" if none.
std::string MistypedMember(const nlohmann::json& j, const nlohmann::json& defaults, const std::string& prefix) {
  for (const auto& [key, value] : j.items()) {
    if (!defaults.contains(key)) continue;
    const nlohmann::json& d = defaults[key];
    if (value.is_object() && d.is_object()) {
      std::string inner = MistypedMember(value, d, prefix + key + ".");
      if (!inner.empty()) return inner;
      continue;
    }
    const bool fits = d.is_number_unsigned() ? JsonIntegerFits<uint64_t>(value)
                      : d.is_number_integer() ? JsonIntegerFits<int32_t>(value)
                      : d.is_number_float()
                          ? value.is_number() && std::abs(value.get<double>()) <= std::numeric_limits<float>::max()
                          : true;  // strings and booleans: nlohmann refuses a mismatch itself
    if (!fits) return prefix + key + " = " + value.dump();
  }
  return "";
}

}  // namespace

std::string TrainConfig::ToJson() const { return DumpJson(ToJsonValue(*this)); }

std::string RecipeJson(const TrainConfig& c, const std::string& db_content_hash, int64_t resumed_step) {
  // What a node may choose for itself: where its files are, its cores, its
  // own place in the rendezvous, and what only rank 0 writes.
  static const char* const kPerNode[] = {
      "data.db",          "data.loader_threads", "data.prefetch", "dist.threads",   "dist.node_rank", "dist.host",
      "dist.port",        "dist.iface",          "dist.timeout_s", "dist.oversubscribe", "dist.pin",
      "checkpoint.dir",   "checkpoint.keep",     "checkpoint.resume", "output.save",  "output.metrics",
      "output.log_every", "output.report"};
  const nlohmann::json config = ToJsonValue(c);
  nlohmann::json recipe = nlohmann::json::object();
  for (const auto& [section, fields] : config.items()) {
    for (const auto& [field, value] : fields.items()) {
      const std::string name = section + "." + field;
      if (std::find(std::begin(kPerNode), std::end(kPerNode), name) == std::end(kPerNode)) recipe[name] = value;
    }
  }
  recipe["data.content_hash"] = db_content_hash;
  recipe["checkpoint.enabled"] = !c.checkpoint.dir.empty();  // a checkpoint is a collective
  recipe["checkpoint.resumed_step"] = resumed_step;
  return DumpJson(recipe);
}

StatusOr<TrainConfig> TrainConfig::FromJson(const std::string& json) {
  nlohmann::json j = ParseJson(json);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("train config: not a JSON object");
  // Checkpoints written before the rename call "shrink" "compress".
  if (j.contains("compress") && !j.contains("shrink")) {
    j["shrink"] = std::move(j["compress"]);
    j.erase("compress");
  }
  const nlohmann::json defaults = ToJsonValue(TrainConfig{});
  std::vector<std::string> unknown;
  UnknownMembers(j, defaults, "", &unknown);
  if (!unknown.empty()) return Status::InvalidArgument("train config: unknown member " + unknown.front());
  const std::string mistyped = MistypedMember(j, defaults, "");
  if (!mistyped.empty()) return Status::InvalidArgument("train config: " + mistyped + " is out of its member's range");
  TrainConfig c;
  try {
    if (j.contains("data")) c.data = j["data"].get<DataConfig>();
    if (j.contains("model")) c.model = j["model"].get<ModelConfig>();
    if (j.contains("optim")) c.optim = j["optim"].get<OptimConfig>();
    if (j.contains("sync")) c.sync = j["sync"].get<SyncConfig>();
    if (j.contains("dist")) c.dist = j["dist"].get<DistConfig>();
    if (j.contains("output")) c.output = j["output"].get<OutputConfig>();
    if (j.contains("checkpoint")) c.checkpoint = j["checkpoint"].get<CheckpointConfig>();
    if (j.contains("shrink")) c.shrink = j["shrink"].get<ShrinkConfig>();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("train config: ") + e.what());
  } catch (const std::invalid_argument& e) {  // a choice's unknown name (ChoiceFromJson)
    return Status::InvalidArgument(std::string("train config: ") + e.what());
  }
  return c;
}

std::vector<std::string> TrainConfig::Differences(const TrainConfig& other) const {
  const nlohmann::json a = ToJsonValue(*this), b = ToJsonValue(other);
  std::vector<std::string> out;
  for (const auto& [section, fields] : a.items()) {
    for (const auto& [field, value] : fields.items()) {
      const nlohmann::json& theirs = b[section][field];
      if (value != theirs) out.push_back(section + "." + field + ": " + DumpJson(value) + " -> " + DumpJson(theirs));
    }
  }
  return out;
}

}  // namespace granary
