// The statistics a build records of a split's feature fields (FieldStatistics
// in store/manifest.h), accumulated sample by sample in the split's order
// (Welford's method) within a block of samples, blocks merged in order, so
// they do not depend on the number of threads.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/manifest.h"
#include "store/schema.h"

namespace granary {

class StatisticsAccumulator {
 public:
  StatisticsAccumulator() = default;  // no fields
  // The schema's fields that HasStatistics.
  explicit StatisticsAccumulator(const Schema& schema);

  // Whether the schema has no field it keeps statistics of (Add then needs no fields).
  bool empty() const { return fields_.empty(); }
  // One accepted sample: its fields' bytes in schema order (Sample::fields).
  void Add(const std::vector<std::string>& fields);
  // The samples `other` (of the same schema) saw, as if added here after
  // those seen so far (Chan et al.'s pairwise update): blocks accumulated
  // in parallel, merged in order.
  void Merge(const StatisticsAccumulator& other);
  // Field name -> its statistics; empty if no field has them. A field that
  // held an infinite value has none.
  std::map<std::string, FieldStatistics> Result() const;

  // The state, for a build's journal: --resume continues from it exactly.
  nlohmann::json ToJson() const;
  // Corruption if `j` does not hold a state of this schema's fields.
  static StatusOr<StatisticsAccumulator> FromJson(const nlohmann::json& j, const Schema& schema);

 private:
  struct Field {
    size_t index = 0;  // in the schema
    std::string name;
    bool float64 = false;
    uint64_t samples = 0;
    std::vector<uint64_t> missing;
    std::vector<double> mean, m2, min, max;  // over the values present; m2: sum of squared deviations
  };
  std::vector<Field> fields_;
};

}  // namespace granary
