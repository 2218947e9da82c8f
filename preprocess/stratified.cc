#include "preprocess/stratified.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

namespace granary {

std::map<int64_t, uint64_t> StratifiedShares(const std::map<int64_t, uint64_t>& count, uint64_t total,
                                             uint64_t limit) {
  if (limit == 0 || total <= limit) return count;
  // Each class's whole share, then the rest one each by largest remainder.
  std::map<int64_t, uint64_t> share;
  std::vector<std::tuple<uint64_t, int64_t>> remainders;  // (-remainder as a sort key, label)
  uint64_t given = 0;
  for (const auto& [label, n] : count) {
    const uint64_t scaled = n * limit;  // item counts: their product stays far below 2^64
    share[label] = scaled / total;
    given += share[label];
    remainders.emplace_back(total - scaled % total, label);
  }
  std::sort(remainders.begin(), remainders.end());
  for (size_t i = 0; given < limit && i < remainders.size(); ++i, ++given) ++share[std::get<1>(remainders[i])];
  return share;
}

std::vector<size_t> StratifiedFirst(const std::vector<int64_t>& labels, uint64_t limit) {
  std::vector<size_t> all(labels.size());
  std::iota(all.begin(), all.end(), size_t{0});
  if (limit == 0 || labels.size() <= limit) return all;
  std::map<int64_t, uint64_t> count;
  for (int64_t label : labels) ++count[label];
  std::map<int64_t, uint64_t> share = StratifiedShares(count, labels.size(), limit);
  std::vector<size_t> kept;
  kept.reserve(limit);
  for (size_t i = 0; i < labels.size(); ++i) {
    uint64_t& left = share[labels[i]];
    if (left > 0) {
      kept.push_back(i);
      --left;
    }
  }
  return kept;
}

}  // namespace granary
