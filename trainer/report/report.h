// What rank 0 tells the user about a run: the layout and config at start, the
// epoch plan, a progress line while an epoch runs (on a terminal only), a line
// per epoch, or (json) one JSON object at the end; and the files the config
// asks for: --metrics (JSON lines as the run goes) and --report (one HTML
// page at the end). Other ranks report nothing. Used from the training thread.
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "base/status.h"
#include "trainer/config/config.h"
#include "trainer/launch/layout.h"
#include "trainer/report/observer.h"

namespace granary {

class RunReport : public RunObserver {
 public:
  // `config` and `layout` must outlive the report.
  RunReport(const TrainConfig& config, const Layout& layout, int rank, bool json);
  ~RunReport() override;
  RunReport(const RunReport&) = delete;
  RunReport& operator=(const RunReport&) = delete;

  // Layout and config (text); opens --metrics. IOError naming the file.
  Status Start();
  void Plan(const EpochPlanReport& plan) override;
  void Step(const StepReport& step) override;
  void Epoch(const EpochReport& report) override;
  // Text: a line of the figures and one per layer left in fp32 (stderr);
  // json: the "quantized" member; --metrics: a "quantized" line.
  void Result(const RunResult& result) override;
  // "train: <line>" on stderr, clearing a progress line first.
  void Note(const std::string& line) override;
  // The JSON object (json) and --report; closes --metrics. IOError naming
  // the file, also for a --metrics line that could not be written.
  Status Finish(const std::vector<EpochReport>& reports);
  // The JSON output's "tune" member: the table --tune chose this run's layout by.
  void SetTuneTable(std::string json) { tune_table_ = std::move(json); }

 private:
  bool text() const { return rank_ == 0 && !json_; }
  void WriteMetrics(const std::string& line);

  const TrainConfig& config_;
  const Layout& layout_;
  std::string tune_table_;
  std::vector<RunResult> results_;
  int rank_;
  bool json_;
  bool progress_;  // rank 0, text, stderr a terminal
  std::chrono::steady_clock::time_point last_drawn_;
  bool line_open_ = false;  // a progress line waits to be cleared
  std::FILE* metrics_ = nullptr;
  Status metrics_error_;  // the first failed --metrics write, returned by Finish
  std::vector<StepReport> logged_steps_;  // every --log-every steps, for --report
  double window_loss_ = 0;                // summed over the steps since the last logged one
  int window_steps_ = 0;
};

}  // namespace granary
