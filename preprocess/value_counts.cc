#include "preprocess/value_counts.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "base/names_text.h"

namespace granary {

ValueCounter::ValueCounter(const Schema& schema) {
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    const FieldSpec& spec = schema.fields[i];
    if (!spec.shape.empty() || IsFloatDType(spec.dtype)) continue;
    Field f;
    f.index = i;
    f.name = spec.name;
    f.dtype = spec.dtype;
    fields_.push_back(std::move(f));
  }
}

void ValueCounter::Bound(Field& f) {
  if (f.counts.size() <= kMaxCountedValues) return;
  f.counted = false;
  f.counts.clear();
}

void ValueCounter::Add(const std::vector<std::string>& fields) {
  for (Field& f : fields_) {
    if (!f.counted || f.index >= fields.size() || fields[f.index].size() != DTypeBytes(f.dtype)) {
      continue;  // (never for an accepted sample)
    }
    const std::string& bytes = fields[f.index];
    const int64_t value = VisitDType(f.dtype, [&](auto zero) {
      decltype(zero) v;
      std::memcpy(&v, bytes.data(), sizeof v);
      return static_cast<int64_t>(v);
    });
    ++f.counts[value];
    Bound(f);
  }
}

void ValueCounter::AddToOnlyField(int64_t value) {
  if (fields_.size() != 1 || !fields_[0].counted) return;  // (none counted: nothing to add)
  ++fields_[0].counts[value];
  Bound(fields_[0]);
}

void ValueCounter::Merge(const ValueCounter& other) {
  if (other.fields_.size() != fields_.size()) return;  // a block's of no samples: nothing to add
  for (size_t k = 0; k < fields_.size(); ++k) {
    Field& a = fields_[k];
    a.counted = a.counted && other.fields_[k].counted;
    if (!a.counted) {
      a.counts.clear();
      continue;
    }
    for (const auto& [value, n] : other.fields_[k].counts) a.counts[value] += n;
    Bound(a);
  }
}

const std::map<int64_t, uint64_t>* ValueCounter::Counts(const std::string& name) const {
  for (const Field& f : fields_) {
    if (f.name == name) return f.counted ? &f.counts : nullptr;
  }
  return nullptr;
}

nlohmann::json ValueCounter::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const Field& f : fields_) {
    j[f.name] = f.counted ? nlohmann::json(std::vector<std::pair<int64_t, uint64_t>>(f.counts.begin(), f.counts.end()))
                          : nlohmann::json(nullptr);
  }
  return j;
}

StatusOr<ValueCounter> ValueCounter::FromJson(const nlohmann::json& j, const Schema& schema) {
  // A split not begun when the checkpoint was taken has no state yet.
  if (j.is_object() && j.empty()) return ValueCounter();
  ValueCounter c(schema);
  if (j.is_null()) {  // not known: none counted
    for (Field& f : c.fields_) f.counted = false;
    return c;
  }
  try {
    if (j.size() != c.fields_.size()) throw std::runtime_error("fields differ");
    for (Field& f : c.fields_) {
      const nlohmann::json& counts = j.at(f.name);
      f.counted = !counts.is_null();
      if (f.counted) {
        for (const auto& [value, n] : counts.get<std::vector<std::pair<int64_t, uint64_t>>>()) f.counts[value] += n;
      }
      if (f.counts.size() > kMaxCountedValues) throw std::runtime_error("field '" + f.name + "': too many values");
    }
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("build journal checkpoint: value counts: ") + e.what());
  }
  return c;
}

std::vector<uint64_t> ClassCountsOf(const std::map<int64_t, uint64_t>& counts, int64_t classes) {
  std::vector<uint64_t> out(static_cast<size_t>(std::max<int64_t>(classes, 0)));
  for (const auto& [value, n] : counts) {
    if (value < 0 || value >= classes) return {};
    out[static_cast<size_t>(value)] = n;
  }
  return out;
}

namespace {

// The split a model is trained on: "train", else the one of most samples.
const std::vector<uint64_t>* TrainingCounts(const Manifest& m, std::string* name) {
  if (auto train = m.class_counts.find("train"); train != m.class_counts.end()) {
    *name = train->first;
    return &train->second;
  }
  const std::vector<uint64_t>* found = nullptr;
  uint64_t most = 0;
  for (const auto& [split, counts] : m.class_counts) {
    uint64_t n = 0;
    for (uint64_t c : counts) n += c;
    if (found == nullptr || n > most) {
      found = &counts;
      most = n;
      *name = split;
    }
  }
  return found;
}

}  // namespace

std::string ImbalanceNote(const Manifest& m) {
  std::string split;
  const std::vector<uint64_t>* trained = TrainingCounts(m, &split);
  if (trained == nullptr) return "";
  const std::vector<uint64_t>& counts = *trained;
  size_t largest = counts.size(), smallest = counts.size();
  uint64_t total = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    total += counts[c];
    if (counts[c] == 0) continue;
    if (largest == counts.size() || counts[c] > counts[largest]) largest = c;
    if (smallest == counts.size() || counts[c] < counts[smallest]) smallest = c;
  }
  if (largest == smallest || counts[largest] < kImbalancedRatio * counts[smallest]) return "";
  const auto name = [&](size_t c) { return "'" + m.ClassName(static_cast<int64_t>(c)) + "'"; };
  const auto real = [](uint64_t n) { return static_cast<double>(n); };
  char ratio[32], share[32];
  std::snprintf(ratio, sizeof ratio, "%.0fx", real(counts[largest]) / real(counts[smallest]));
  std::snprintf(share, sizeof share, "%.1f%%", 100.0 * real(counts[largest]) / real(total));
  return "split '" + split + "' is imbalanced: class " + name(largest) + " has " + std::to_string(counts[largest]) +
         " samples, " + name(smallest) + " " + std::to_string(counts[smallest]) + " (" + ratio +
         "): a model that always answers " + name(largest) + " scores " + share + " accuracy on it; train reports "
         "the balanced accuracy beside it, and --class-weights balanced weighs the loss by the classes' rarity";
}

std::vector<std::string> ClassGapNotes(const Manifest& manifest) {
  std::string training;
  const std::vector<uint64_t>* trained = TrainingCounts(manifest, &training);
  if (trained == nullptr) return {};
  std::vector<std::string> notes;
  for (const auto& [split, counts] : manifest.class_counts) {
    if (split == training || counts.size() != trained->size()) continue;
    std::vector<std::string> absent, unlearnt;
    for (size_t c = 0; c < counts.size(); ++c) {
      const std::string name = "'" + manifest.ClassName(static_cast<int64_t>(c)) + "'";
      if (counts[c] == 0 && (*trained)[c] > 0) absent.push_back(name);
      if (counts[c] > 0 && (*trained)[c] == 0) unlearnt.push_back(name);
    }
    if (!absent.empty()) {
      notes.push_back("split '" + split + "' holds no sample of class(es) " + NamesText(absent) + " that '" +
                      training + "' has: its scores say nothing of them");
    }
    if (!unlearnt.empty()) {
      notes.push_back("split '" + training + "' holds no sample of class(es) " + NamesText(unlearnt) + " that '" +
                      split + "' has: no model trained on it learns them");
    }
  }
  return notes;
}

}  // namespace granary
