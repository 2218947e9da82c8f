#include "preprocess/field_statistics.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace granary {

StatisticsAccumulator::StatisticsAccumulator(const Schema& schema) {
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    const FieldSpec& spec = schema.fields[i];
    if (!HasStatistics(spec)) continue;
    const size_t n = static_cast<size_t>(spec.FixedElements());
    Field f;
    f.index = i;
    f.name = spec.name;
    f.float64 = spec.dtype == DType::kFloat64;
    f.missing.assign(n, 0);
    f.mean.assign(n, 0);
    f.m2.assign(n, 0);
    f.min.assign(n, std::numeric_limits<double>::infinity());
    f.max.assign(n, -std::numeric_limits<double>::infinity());
    fields_.push_back(std::move(f));
  }
}

void StatisticsAccumulator::Add(const std::vector<std::string>& fields) {
  for (Field& f : fields_) {
    const char* bytes = fields[f.index].data();
    const size_t width = f.float64 ? 8 : 4;
    if (fields[f.index].size() != f.mean.size() * width) continue;  // never for an accepted sample
    ++f.samples;
    for (size_t i = 0; i < f.mean.size(); ++i) {
      double x;
      if (f.float64) {
        std::memcpy(&x, bytes + 8 * i, 8);
      } else {
        float v;
        std::memcpy(&v, bytes + 4 * i, 4);
        x = v;
      }
      if (std::isnan(x)) {
        ++f.missing[i];
        continue;
      }
      const double present = static_cast<double>(f.samples - f.missing[i]);
      const double delta = x - f.mean[i];
      f.mean[i] += delta / present;
      f.m2[i] += delta * (x - f.mean[i]);
      f.min[i] = std::min(f.min[i], x);
      f.max[i] = std::max(f.max[i], x);
    }
  }
}

void StatisticsAccumulator::Merge(const StatisticsAccumulator& other) {
  if (other.fields_.size() != fields_.size()) return;  // a block's of no samples: nothing to add
  for (size_t k = 0; k < fields_.size(); ++k) {
    Field& a = fields_[k];
    const Field& b = other.fields_[k];
    for (size_t i = 0; i < a.mean.size(); ++i) {
      const double na = static_cast<double>(a.samples - a.missing[i]);
      const double nb = static_cast<double>(b.samples - b.missing[i]);
      if (nb == 0) continue;
      const double n = na + nb, delta = b.mean[i] - a.mean[i];
      a.mean[i] += delta * (nb / n);
      a.m2[i] += b.m2[i] + delta * delta * (na * nb / n);
      a.min[i] = std::min(a.min[i], b.min[i]);
      a.max[i] = std::max(a.max[i], b.max[i]);
    }
    for (size_t i = 0; i < a.mean.size(); ++i) a.missing[i] += b.missing[i];
    a.samples += b.samples;
  }
}

std::map<std::string, FieldStatistics> StatisticsAccumulator::Result() const {
  std::map<std::string, FieldStatistics> out;
  for (const Field& f : fields_) {
    FieldStatistics& s = out[f.name];
    s.samples = f.samples;
    s.missing = f.missing;
    for (size_t i = 0; i < f.mean.size(); ++i) {
      const uint64_t present = f.samples - f.missing[i];
      const double none = std::nan("");
      s.mean.push_back(present > 0 ? f.mean[i] : none);
      s.stddev.push_back(present > 0 ? std::sqrt(std::max(0.0, f.m2[i] / static_cast<double>(present))) : none);
      s.min.push_back(present > 0 ? f.min[i] : none);
      s.max.push_back(present > 0 ? f.max[i] : none);
    }
    // An infinite value (granary.write takes any float), or a square past
    // double's range: no statistics a model could standardise with.
    bool finite = true;
    for (size_t i = 0; i < f.mean.size(); ++i) {
      if (f.samples - f.missing[i] > 0) {
        finite = finite && std::isfinite(s.mean[i]) && std::isfinite(s.stddev[i]) && std::isfinite(s.min[i]) &&
                 std::isfinite(s.max[i]);
      }
    }
    if (!finite) out.erase(f.name);
  }
  return out;
}

nlohmann::json StatisticsAccumulator::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const Field& f : fields_) {
    // min and max are infinite until a value is present: JSON holds them as null.
    const auto finite = [](const std::vector<double>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
      return a;
    };
    j[f.name] = {{"samples", f.samples}, {"missing", f.missing}, {"mean", f.mean},
                 {"m2", f.m2},           {"min", finite(f.min)}, {"max", finite(f.max)}};
  }
  return j;
}

StatusOr<StatisticsAccumulator> StatisticsAccumulator::FromJson(const nlohmann::json& j, const Schema& schema) {
  // A split not begun when the checkpoint was taken has no state yet.
  if (j.is_object() && j.empty()) return StatisticsAccumulator();
  StatisticsAccumulator a(schema);
  try {
    if (j.size() != a.fields_.size()) throw std::runtime_error("fields differ");
    for (Field& f : a.fields_) {
      const nlohmann::json& s = j.at(f.name);
      const size_t n = f.mean.size();
      f.samples = s.at("samples").get<uint64_t>();
      f.missing = s.at("missing").get<std::vector<uint64_t>>();
      f.mean = s.at("mean").get<std::vector<double>>();
      f.m2 = s.at("m2").get<std::vector<double>>();
      for (size_t i = 0; i < n && s.at("min").size() == n && s.at("max").size() == n; ++i) {
        if (!s.at("min")[i].is_null()) f.min[i] = s.at("min")[i].get<double>();
        if (!s.at("max")[i].is_null()) f.max[i] = s.at("max")[i].get<double>();
      }
      if (f.missing.size() != n || f.mean.size() != n || f.m2.size() != n || s.at("min").size() != n ||
          s.at("max").size() != n) {
        throw std::runtime_error("field '" + f.name + "': not " + std::to_string(n) + " values");
      }
    }
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("build journal checkpoint: statistics: ") + e.what());
  }
  return a;
}

}  // namespace granary
