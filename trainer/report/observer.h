// What a run tells as it goes: the reports of its plan, steps and epochs,
// and the notes (a resume, a skipped checkpoint, a skipped record) a user
// should see. Plain data and an interface; no torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace granary {

// A figure a feature (features/feature.h) adds to an epoch's report: its
// JSON member and value ("test_accuracy": 0.85).
struct EpochFigure {
  std::string name;
  std::variant<double, uint64_t, std::string> value;
};

// An epoch's report: the loop's figures (loop/epoch_figures.h), then what
// the hooks added (loop/hook.h), in their order, which the report prints
// and writes without knowing the features: their figures by name, their
// part of the epoch's line, and their lines after it.
struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0;      // mean over all ranks' samples
  double lr = 0;              // the learning rate of the epoch's last step
  double seconds = 0;         // training part of the epoch
  double samples_per_s = 0;   // over all ranks
  double stall_fraction = 0;  // rank 0's time waiting for data / epoch time
  double comm_fraction = 0;     // rank 0's time blocked waiting for the gradient sync / epoch time
  double compute_fraction = 0;  // rank 0's forward, backward and optimizer step (sync wait excluded) / epoch time
  double queue_depth = 0;     // rank 0's mean number of ready batches at each step
  double peak_rss_mb = 0;     // the ranks' peak resident memory so far, summed (MiB)
  uint64_t parameters = 0;        // the model's trainable values during the epoch
  uint64_t parameters_after = 0;  // and after the epoch's hooks (a prune changes them)

  std::vector<EpochFigure> figures;  // JSON members the hooks added, each name once
  std::string line_part;             // on the epoch's line after train_loss ("  test_loss 0.41  test_acc 0.85")
  std::vector<std::string> lines_after;  // whole lines after the epoch's line
  // Lines said only after the run's last epoch: the loop adds them to
  // lines_after where this epoch is it (its configured last, or one a hook
  // stopped the run after).
  std::vector<std::string> lines_if_last;

  // Sets figure `name` (replacing one of that name).
  void Set(const std::string& name, std::variant<double, uint64_t, std::string> value);
  const EpochFigure* Find(const std::string& name) const;
  // A number figure (double or uint64_t) by name; nullopt if none is.
  std::optional<double> Number(const std::string& name) const;
};

// What every rank reads per epoch, known before training starts.
struct EpochPlanReport {
  uint64_t samples_per_rank = 0;
  uint64_t padded = 0;   // samples read twice per epoch so ranks are equal
  uint64_t dropped = 0;  // samples not read per epoch (drop_last)
  int threads_per_rank = 0;
  std::string model;        // resolved name
  uint64_t parameters = 0;  // trainable values
  double peak_lr = 0;       // after --lr-scaling
};

// Rank 0's view of the step just taken: for progress lines and metrics.
struct StepReport {
  int epoch = 0;               // 1-based
  uint64_t step = 0;           // optimizer steps so far in the epoch
  uint64_t steps = 0;          // optimizer steps in the epoch
  int64_t global_step = 0;     // optimizer steps so far in the run
  double loss = 0;             // rank 0's training loss of this step
  double epoch_loss = 0;       // rank 0's training loss, mean over the epoch so far
  double lr = 0;               // the rate of this step
  double samples_per_s = 0;    // over all ranks, the epoch so far (rank 0's rate x ranks)
  double seconds = 0;          // since the epoch started
};

// What a feature (features/feature.h) found over the whole run, told once
// by rank 0: its JSON goes into --json under `name` and to --metrics as a
// line of type `name`; its lines are printed with the text report.
struct RunResult {
  std::string name;                // "quantized", "stop_at_accuracy"
  std::string json;                // a JSON object, as text
  std::vector<std::string> lines;  // each without a newline
};

// What a run tells as it goes. A rank calls it on the training thread;
// Step is called on rank 0 only, after every optimizer step.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void Plan(const EpochPlanReport& plan) = 0;  // once, before the first epoch
  virtual void Step(const StepReport& step) = 0;
  virtual void Epoch(const EpochReport& epoch) = 0;
  virtual void Result(const RunResult& result) = 0;  // rank 0, after the last epoch
  // One line for the user (no "train: " prefix, no newline), on any rank.
  virtual void Note(const std::string& line) = 0;
};

}  // namespace granary
