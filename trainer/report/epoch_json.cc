#include "trainer/report/epoch_json.h"

#include <string>
#include <type_traits>
#include <variant>

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

// Every member of an EpochReport in its JSON form, in one list: its name,
// the member, and when it is written (and so required when read).
enum class When {
  kAlways,
  kIfSet,        // a string, when not empty
  kIfEvaluated,  // with the epoch's evaluation (EpochReport::evaluated)
  kIfReached,    // when --stop-at-accuracy's target was reached (target_reached)
};
using Member = std::variant<int EpochReport::*, double EpochReport::*, uint64_t EpochReport::*,
                            std::string EpochReport::*>;
struct Field {
  const char* name;
  Member member;
  When when;
};
const Field kFields[] = {
    {"epoch", &EpochReport::epoch, When::kAlways},
    {"train_loss", &EpochReport::train_loss, When::kAlways},
    {"lr", &EpochReport::lr, When::kAlways},
    {"seconds", &EpochReport::seconds, When::kAlways},
    {"samples_per_s", &EpochReport::samples_per_s, When::kAlways},
    {"stall_fraction", &EpochReport::stall_fraction, When::kAlways},
    {"comm_fraction", &EpochReport::comm_fraction, When::kAlways},
    {"compute_fraction", &EpochReport::compute_fraction, When::kAlways},
    {"queue_depth", &EpochReport::queue_depth, When::kAlways},
    {"peak_rss_mb", &EpochReport::peak_rss_mb, When::kAlways},
    {"parameters", &EpochReport::parameters, When::kAlways},
    {"parameters_after", &EpochReport::parameters_after, When::kAlways},
    {"pruned", &EpochReport::pruned, When::kIfSet},
    {"weights_hash", &EpochReport::weights_hash, When::kIfSet},
    {"test_loss", &EpochReport::test_loss, When::kIfEvaluated},
    {"test_accuracy", &EpochReport::test_accuracy, When::kIfEvaluated},
    {"test_samples", &EpochReport::test_samples, When::kIfEvaluated},
    {"seconds_to_target", &EpochReport::seconds_to_target, When::kIfReached},
};

// Whether `field` is written for `r`.
bool Written(const Field& field, const EpochReport& r) {
  switch (field.when) {
    case When::kAlways: return true;
    case When::kIfSet: return !(r.*std::get<std::string EpochReport::*>(field.member)).empty();
    case When::kIfEvaluated: return r.evaluated;
    case When::kIfReached: return r.target_reached;
  }
  return false;
}

}  // namespace

nlohmann::json EpochToJson(const EpochReport& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field& field : kFields) {
    if (Written(field, r)) std::visit([&](auto member) { j[field.name] = r.*member; }, field.member);
  }
  return j;
}

StatusOr<EpochReport> EpochFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("epoch report: not a JSON object");
  EpochReport r;
  for (const Field& field : kFields) {
    if (j.contains(field.name)) {
      r.evaluated = r.evaluated || field.when == When::kIfEvaluated;
      r.target_reached = r.target_reached || field.when == When::kIfReached;
    }
  }
  for (const Field& field : kFields) {
    if (field.when == When::kIfSet && !j.contains(field.name)) continue;
    if (!Written(field, r) && field.when != When::kIfSet) continue;
    GRANARY_RETURN_IF_ERROR(std::visit([&](auto member) { return Read(j, field.name, &(r.*member)); }, field.member));
  }
  return r;
}

}  // namespace granary
