// --limit N as a stratified subset: every class keeps its share of N.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace granary {

// The positions of at most `limit` of the items whose classes are `labels`:
// each class's share of `limit` in proportion to its count (shares rounded
// by largest remainder, ties to the smaller label), its first items in
// their order; the positions ascending. Every position if `limit` is 0 or
// at least the count.
std::vector<std::size_t> StratifiedFirst(const std::vector<int64_t>& labels, uint64_t limit);

// How many items of each class StratifiedFirst keeps, from the classes'
// counts (`total` items in all): every item if `limit` is 0 or at least `total`.
std::map<int64_t, uint64_t> StratifiedShares(const std::map<int64_t, uint64_t>& count, uint64_t total,
                                             uint64_t limit);

// `items` reduced to StratifiedFirst of their labels (`label_of(item)`).
template <typename T, typename LabelOf>
void KeepStratified(std::vector<T>* items, uint64_t limit, LabelOf label_of) {
  if (limit == 0 || items->size() <= limit) return;
  std::vector<int64_t> labels;
  labels.reserve(items->size());
  for (const T& item : *items) labels.push_back(label_of(item));
  std::vector<T> kept;
  for (std::size_t i : StratifiedFirst(labels, limit)) kept.push_back(std::move((*items)[i]));
  items->swap(kept);
}

}  // namespace granary
