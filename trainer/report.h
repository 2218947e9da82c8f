// What rank 0 tells the user about a run: the layout and config at start, the
// epoch plan, a line per epoch, or (json) one JSON object at the end. Other
// ranks report nothing. Used from the training thread only.
#pragma once

#include <vector>

#include "trainer/config.h"
#include "trainer/layout.h"
#include "trainer/trainer.h"

namespace granary {

class RunReport {
 public:
  // `config` and `layout` must outlive the report.
  RunReport(const TrainConfig& config, const Layout& layout, int rank, bool json);

  void Start() const;                             // layout and config (text)
  void Plan(const EpochPlanReport& plan) const;   // samples per rank (text)
  void Epoch(const EpochReport& report) const;    // one line (text)
  void Finish(const std::vector<EpochReport>& reports) const;  // the JSON object (json)

 private:
  bool text() const { return rank_ == 0 && !json_; }

  const TrainConfig& config_;
  const Layout& layout_;
  int rank_;
  bool json_;
};

}  // namespace granary
