// A whole `train` run from its TrainConfig: as the launcher (rank < 0) it
// checks the config and the db, then runs the ranks (trainer/launch/launch.h) and
// waits; as a rank it trains (trainer/run_rank.h) and reports
// (trainer/report/report.h). Errors are printed as one line; returns the exit status.
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"
#include "trainer/config/config.h"

namespace granary {

// train --tune (trainer/tune/tune.h), as train_main.cc parsed it.
struct TuneRequest {
  bool tune = false;      // --tune: measure the candidates, then train with the fastest
  bool only = false;      // --tune-only: measure and print, do not train
  bool numerics = false;  // --tune-numerics: bf16 and another batch may be chosen
  double seconds = 1.5;   // --tune-seconds: per candidate
  // The command line without the flags a candidate sets and --tune's own.
  std::vector<std::string> args;
  std::string table_json;  // internal --tune-table: the table a tuned run reports under "tune"
};

// `argv`: the command line the ranks are started with (plus "--rank R
// --layout JSON", and "--rendezvous-file F" on one machine). `json`: rank 0 prints one JSON object instead of
// text. `layout_json`: a rank's layout, as the launcher planned it ("" in the
// launcher, which plans it). `given`: the flags on the command line
// ("--ranks"), which a job's shape (torchrun, mpirun, srun) must not contradict.
// `env`: the process's environment, read once by main: every variable the
// run reads (a job's shape, the heartbeat, the allocator's) is read from it.
int RunTrain(TrainConfig config, int rank, bool json, const std::vector<std::string>& argv,
             const std::string& layout_json, const TuneRequest& tune, const std::vector<std::string>& given,
             const Environment& env);

}  // namespace granary
