// A split that raises `cancel` when item `at` is produced, as Ctrl-C would:
// for the tests of interrupted and resumed builds.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "preprocess/source.h"

namespace granary {
namespace testing {

class CancellingSplit : public SplitSource {
 public:
  CancellingSplit(const SplitSource& inner, uint64_t at, std::atomic<bool>* cancel)
      : inner_(inner), at_(at), cancel_(cancel) {}
  const std::string& name() const override { return inner_.name(); }
  uint64_t size() const override { return inner_.size(); }
  uint64_t raw_bytes() const override { return inner_.raw_bytes(); }
  std::string ItemName(uint64_t i) const override { return inner_.ItemName(i); }
  Status Produce(uint64_t i, Sample* s) const override {
    if (i == at_) cancel_->store(true);
    return inner_.Produce(i, s);
  }

 private:
  const SplitSource& inner_;
  uint64_t at_;
  std::atomic<bool>* cancel_;
};

}  // namespace testing
}  // namespace granary
