#include "trainer/report/epoch_json.h"

#include <algorithm>
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

// The loop's members of an EpochReport in their JSON form, in one list: its
// name and the member; every one is written, and required when read. What
// the hooks added (EpochReport::figures) follows, by its own names.
using Member = std::variant<int EpochReport::*, double EpochReport::*, uint64_t EpochReport::*>;
struct Field {
  const char* name;
  Member member;
};
const Field kFields[] = {
    {"epoch", &EpochReport::epoch},
    {"train_loss", &EpochReport::train_loss},
    {"lr", &EpochReport::lr},
    {"seconds", &EpochReport::seconds},
    {"samples_per_s", &EpochReport::samples_per_s},
    {"stall_fraction", &EpochReport::stall_fraction},
    {"comm_fraction", &EpochReport::comm_fraction},
    {"compute_fraction", &EpochReport::compute_fraction},
    {"queue_depth", &EpochReport::queue_depth},
    {"peak_rss_mb", &EpochReport::peak_rss_mb},
    {"parameters", &EpochReport::parameters},
    {"parameters_after", &EpochReport::parameters_after},
};

bool IsField(const std::string& name) {
  for (const Field& field : kFields) {
    if (name == field.name) return true;
  }
  return false;
}

}  // namespace

nlohmann::json EpochToJson(const EpochReport& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field& field : kFields) std::visit([&](auto member) { j[field.name] = r.*member; }, field.member);
  for (const EpochFigure& f : r.figures) std::visit([&](const auto& value) { j[f.name] = value; }, f.value);
  if (!r.lines_after.empty()) j["notes"] = r.lines_after;  // what the text says after the epoch's line
  return j;
}

StatusOr<EpochReport> EpochFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("epoch report: not a JSON object");
  EpochReport r;
  for (const Field& field : kFields) {
    GRANARY_RETURN_IF_ERROR(std::visit([&](auto member) { return Read(j, field.name, &(r.*member)); }, field.member));
  }
  for (const auto& [name, value] : j.items()) {  // the hooks' figures, in the JSON's (name) order
    if (IsField(name)) continue;
    if (name == "notes") {
      if (!value.is_array() || !std::all_of(value.begin(), value.end(), [](const auto& v) { return v.is_string(); })) {
        return Status::InvalidArgument("epoch report: 'notes' is not an array of strings");
      }
      r.lines_after = value.get<std::vector<std::string>>();
    } else if (value.is_string()) {
      r.Set(name, value.get<std::string>());
    } else if (value.is_number_unsigned()) {
      r.Set(name, value.get<uint64_t>());
    } else if (value.is_number()) {
      r.Set(name, value.get<double>());
    } else {
      return Status::InvalidArgument("epoch report: '" + name + "' is " + value.type_name());
    }
  }
  return r;
}

}  // namespace granary
