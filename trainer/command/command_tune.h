// launch --tune: which layout (ranks x threads) and allocator run a user's
// command fastest, measured on the command itself, unchanged. A probe runs
// the job in a candidate's layout for a few seconds of its training steps
// (counted by granary's startup module: torch.optim steps, on the
// heartbeat board) and is stopped; the rate compared is steps per second
// summed over the ranks (with a fixed per-rank batch, samples per second
// up to that batch). As train --tune: one lever at a time, so the cost
// grows with the levers, not their product: ranks x threads over every
// core (with --ranks given: fewer threads per rank instead), then pinning
// off, then each allocator, each on the best so far.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/config/choices.h"

namespace granary {

struct CommandCandidate {
  int ranks = 1;
  int threads = 1;
  bool pin = true;
  Allocator allocator = Allocator::kGlibc;
  std::string Describe() const;  // "2 x 1, pinned, glibc"
};

struct CommandProbe {
  double steps_per_s = 0;  // summed over the ranks
  double seconds = 0;      // the measured window
  std::string error;       // why it measured nothing, if it did not
};

struct CommandTuneRow {
  CommandCandidate candidate;
  CommandProbe probe;
  bool chosen = false;
};

struct CommandTuneTable {
  int cores = 0;
  double seconds = 0;  // the whole search
  bool ranks_varied = false;
  std::vector<CommandTuneRow> rows;

  const CommandTuneRow* Chosen() const;
  std::string ToJson() const;
  std::string ToText() const;  // for a terminal, the chosen row marked
};

struct CommandTuneOptions {
  int cores = 1;
  int ranks = 0;  // --ranks given: only threads and allocators vary; 0: ranks too
  std::vector<Allocator> allocators;  // those installed, glibc first
  std::function<StatusOr<CommandProbe>(const CommandCandidate&)> run_probe;
};

// Measures the candidates and marks the fastest. A probe that could not
// start, or a command that shows no steps on its first probe, ends the
// search with the probe's error.
StatusOr<CommandTuneTable> TuneCommand(const CommandTuneOptions& options);

}  // namespace granary
