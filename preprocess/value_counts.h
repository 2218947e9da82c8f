// How many samples of a split hold each value of its scalar integer fields
// (a class label's: the manifest's "class_counts"), counted as a build
// writes them, in blocks merged in order as StatisticsAccumulator's are.
// A field with more than kMaxCountedValues distinct values is no class
// label (an id, a count): its counting stops there.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/manifest.h"
#include "store/schema.h"

namespace granary {

inline constexpr size_t kMaxCountedValues = 1 << 16;

class ValueCounter {
 public:
  ValueCounter() = default;  // no fields
  // The schema's scalar integer fields.
  explicit ValueCounter(const Schema& schema);

  // Whether the schema has no field it counts (Add then needs no fields).
  bool empty() const { return fields_.empty(); }
  // One accepted sample: its fields' bytes in schema order (Sample::fields).
  void Add(const std::vector<std::string>& fields);
  // Whether the schema's field `index` is the one field it counts; then
  // AddToOnlyField counts a sample by that field's value alone (a stored
  // record's label, which its source knows, not decompressed for it).
  bool OnlyField(int index) const { return fields_.size() == 1 && static_cast<int>(fields_[0].index) == index; }
  void AddToOnlyField(int64_t value);
  // The samples `other` (of the same schema) saw.
  void Merge(const ValueCounter& other);
  // Field `name`'s value -> samples; nullptr where it is not counted (no
  // scalar integer field, or one of too many values).
  const std::map<int64_t, uint64_t>* Counts(const std::string& name) const;

  // The state, for a build's journal, and back: Corruption if `j` holds no
  // state of this schema's fields; null: counts not known, no field counted.
  nlohmann::json ToJson() const;
  static StatusOr<ValueCounter> FromJson(const nlohmann::json& j, const Schema& schema);

 private:
  struct Field {
    size_t index = 0;  // in the schema
    std::string name;
    DType dtype = DType::kInt64;
    bool counted = true;  // false past kMaxCountedValues
    std::map<int64_t, uint64_t> counts;
  };
  void Bound(Field& f);
  std::vector<Field> fields_;
};

// The samples of each class 0..classes-1 (a split's `counts` of its label
// values); empty where a value lies outside them.
std::vector<uint64_t> ClassCountsOf(const std::map<int64_t, uint64_t>& counts, int64_t classes);

// The largest class this many times the smallest: a split's accuracy
// flatters a model that answers the largest (granary.write's bound too).
inline constexpr uint64_t kImbalancedRatio = 10;

// What a db's class counts (manifest.class_counts) say that a user should
// know before training on it, of its training split ("train", else the
// largest); none where nothing is counted. That it is imbalanced ("" if
// not):
std::string ImbalanceNote(const Manifest& manifest);
// A class it has that another split lacks (that split's scores say nothing
// of it); a class another split has that it lacks (no model trained on it
// learns it):
std::vector<std::string> ClassGapNotes(const Manifest& manifest);

}  // namespace granary
