#include "trainer/report/epoch_json.h"

#include <string>
#include <type_traits>

namespace granary {
namespace {

// Reads member `name` of `j` into *out; InvalidArgument if it is missing or
// of another type.
template <typename T>
Status Read(const nlohmann::json& j, const char* name, T* out) {
  const auto it = j.find(name);
  if (it == j.end()) return Status::InvalidArgument(std::string("epoch report: no member '") + name + "'");
  const bool fits = std::is_same_v<T, std::string> ? it->is_string()
                    : std::is_floating_point_v<T>  ? it->is_number()
                                                   : it->is_number_integer();
  if (!fits) return Status::InvalidArgument(std::string("epoch report: '") + name + "' is " + it->type_name());
  *out = it->get<T>();
  return Status::OK();
}

}  // namespace

nlohmann::json EpochToJson(const EpochReport& r) {
  nlohmann::json j = {{"epoch", r.epoch},
                      {"train_loss", r.train_loss},
                      {"lr", r.lr},
                      {"seconds", r.seconds},
                      {"samples_per_s", r.samples_per_s},
                      {"stall_fraction", r.stall_fraction},
                      {"comm_fraction", r.comm_fraction},
                      {"compute_fraction", r.compute_fraction},
                      {"queue_depth", r.queue_depth},
                      {"peak_rss_mb", r.peak_rss_mb},
                      {"parameters", r.parameters},
                      {"parameters_after", r.parameters_after}};
  if (!r.pruned.empty()) j["pruned"] = r.pruned;
  if (!r.weights_hash.empty()) j["weights_hash"] = r.weights_hash;
  if (r.evaluated) {
    j["test_loss"] = r.test_loss;
    j["test_accuracy"] = r.test_accuracy;
    j["test_samples"] = r.test_samples;
  }
  if (r.target_reached) j["seconds_to_target"] = r.seconds_to_target;
  return j;
}

StatusOr<EpochReport> EpochFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("epoch report: not a JSON object");
  EpochReport r;
  GRANARY_RETURN_IF_ERROR(Read(j, "epoch", &r.epoch));
  GRANARY_RETURN_IF_ERROR(Read(j, "train_loss", &r.train_loss));
  GRANARY_RETURN_IF_ERROR(Read(j, "lr", &r.lr));
  GRANARY_RETURN_IF_ERROR(Read(j, "seconds", &r.seconds));
  GRANARY_RETURN_IF_ERROR(Read(j, "samples_per_s", &r.samples_per_s));
  GRANARY_RETURN_IF_ERROR(Read(j, "stall_fraction", &r.stall_fraction));
  GRANARY_RETURN_IF_ERROR(Read(j, "comm_fraction", &r.comm_fraction));
  GRANARY_RETURN_IF_ERROR(Read(j, "compute_fraction", &r.compute_fraction));
  GRANARY_RETURN_IF_ERROR(Read(j, "queue_depth", &r.queue_depth));
  GRANARY_RETURN_IF_ERROR(Read(j, "peak_rss_mb", &r.peak_rss_mb));
  GRANARY_RETURN_IF_ERROR(Read(j, "parameters", &r.parameters));
  GRANARY_RETURN_IF_ERROR(Read(j, "parameters_after", &r.parameters_after));
  if (j.contains("pruned")) GRANARY_RETURN_IF_ERROR(Read(j, "pruned", &r.pruned));
  if (j.contains("weights_hash")) GRANARY_RETURN_IF_ERROR(Read(j, "weights_hash", &r.weights_hash));
  r.evaluated = j.contains("test_loss") || j.contains("test_accuracy") || j.contains("test_samples");
  if (r.evaluated) {
    GRANARY_RETURN_IF_ERROR(Read(j, "test_loss", &r.test_loss));
    GRANARY_RETURN_IF_ERROR(Read(j, "test_accuracy", &r.test_accuracy));
    GRANARY_RETURN_IF_ERROR(Read(j, "test_samples", &r.test_samples));
  }
  r.target_reached = j.contains("seconds_to_target");
  if (r.target_reached) GRANARY_RETURN_IF_ERROR(Read(j, "seconds_to_target", &r.seconds_to_target));
  return r;
}

}  // namespace granary
