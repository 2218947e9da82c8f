// train --tune: which layout trains fastest on this machine, found by
// measuring, not by rules of thumb. Each candidate (ranks x threads, and, on
// the best of those, channels-last; with --tune-numerics also bf16 and a
// doubled global batch) is a probe: the run's ranks in the candidate's
// layout with data.probe_s set (trainer/features/tune_probe/probe_window.h), real steps on the user's
// db and model, loader and gradient sync included, warm-up excluded, about
// --tune-seconds each. The search is greedy, one
// lever at a time, so its cost grows with the levers, not their product.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/config/config.h"

namespace granary {

struct TuneCandidate {
  int ranks = 1;
  int threads = 1;
  int64_t batch_size = 64;  // global
  ComputeType precision = ComputeType::kFp32;
  bool channels_last = false;
  Backend backend = Backend::kAuto;  // several ranks when the backend is measured: gloo or mpi; kAuto: the run's
  bool changes_numerics = false;  // precision or batch differ from the user's

  // "2 x 1, batch 32/rank, fp32, channels-last"
  std::string Describe() const;
};

struct TuneRow {
  TuneCandidate candidate;
  double samples_per_s = 0;   // over all ranks, in the measured window
  double comm_fraction = 0;   // rank 0's time blocked on the gradient sync
  double stall_fraction = 0;  // rank 0's time waiting for data
  double peak_rss_mb = 0;     // all ranks together
  std::string error;          // the probe's one line, if it failed
  bool chosen = false;
};

struct TuneTable {
  int cores = 0;
  double probe_seconds = 0;  // --tune-seconds
  double seconds = 0;        // the whole search, start-up of every probe included
  std::vector<TuneRow> rows;

  const TuneRow* Chosen() const;
  std::string ToJson() const;  // {"cores", "seconds", ..., "rows": [{"ranks", "threads", ..., "chosen"}]}
  std::string ToText() const;  // the table for a terminal, the chosen row marked
};

// What a probe's rank 0 printed: `train --json` output, with one epoch
// report of the measured window.
struct ProbeOutput {
  int exit_code = 0;
  std::string out, err;
};

struct TuneOptions {
  int cores = 1;
  bool numerics = false;     // --tune-numerics: bf16 and the batch may change
  bool image_input = false;  // channels-last is a candidate
  bool bf16_native = false;  // bf16 is a candidate (with numerics)
  bool mpi = false;          // --backend auto and MPI at hand: several ranks are measured over Gloo and MPI
  double seconds = 1.5;      // --tune-seconds per candidate
  // Runs `candidate` as a probe; `config` is the user's in its layout,
  // precision and batch, with data.probe_s = seconds.
  std::function<StatusOr<ProbeOutput>(const TrainConfig& config, const TuneCandidate& candidate)> run_probe;
};

// Measures the candidates one lever at a time and marks the fastest.
// InvalidArgument if no candidate fits the cores; a probe that could not run
// or was stopped (Ctrl-C) ends the search with its error; a candidate that
// ran and failed is a row with its error.
StatusOr<TuneTable> RunTune(const TrainConfig& config, const TuneOptions& options);

// `args` with the candidate's flags added (the command line of a run in its layout).
std::vector<std::string> ArgsFor(const std::vector<std::string>& args, const TuneCandidate& candidate);
// `config` in the candidate's layout, precision and batch.
TrainConfig ConfigFor(const TrainConfig& config, const TuneCandidate& candidate);

// `args` without the named options: "--name value" (a value that does not
// start with "--") or "--name=value" for `valued`, "--name" for `flags`.
std::vector<std::string> WithoutOptions(const std::vector<std::string>& args, const std::vector<std::string>& valued,
                                        const std::vector<std::string>& flags);

}  // namespace granary
