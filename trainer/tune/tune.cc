#include "trainer/tune/tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "trainer/clock.h"
#include "trainer/report/epoch_json.h"

namespace granary {
namespace {

// One probe: the candidate's layout trained for about `seconds`.
// An error if the probe could not run or was stopped; a row (with its
// error) if it ran.
StatusOr<TuneRow> Measure(const TrainConfig& config, const TuneCandidate& c, const TuneOptions& o) {
  TuneRow row;
  row.candidate = c;
  TrainConfig probe = ConfigFor(config, c);
  probe.data.probe_s = o.seconds;
  StatusOr<ProbeOutput> run = o.run_probe(probe, c);
  if (!run.ok()) return run.status().WithContext("--tune: " + c.Describe());
  if (run->exit_code != 0) {
    std::string line = run->err.substr(0, run->err.find('\n'));
    if (line.rfind("train: ", 0) == 0) line = line.substr(7);
    row.error = line.empty() ? "exit status " + std::to_string(run->exit_code) : line;
    return row;
  }
  const nlohmann::json j = ParseJson(run->out);
  if (j.is_discarded() || !j.contains("epochs") || j["epochs"].empty()) {
    row.error = "no measurement in the probe's output";
    return row;
  }
  StatusOr<EpochReport> window = EpochFromJson(j["epochs"][0]);
  if (!window.ok()) return window.status().WithContext("--tune: " + c.Describe() + ": the probe's output");
  row.samples_per_s = window->samples_per_s;
  row.comm_fraction = window->comm_fraction;
  row.stall_fraction = window->stall_fraction;
  row.peak_rss_mb = window->peak_rss_mb;
  return row;
}

// Whether `c` is a run the config's bounds allow on these cores.
bool Fits(const TrainConfig& config, const TuneCandidate& c, int cores) {
  return ConfigFor(config, c).Validate(cores).ok();
}

std::string Percent(double fraction) { return std::to_string(static_cast<int>(fraction * 100 + 0.5)) + "%"; }

}  // namespace

std::string TuneCandidate::Describe() const {
  return std::to_string(ranks) + " x " + std::to_string(threads) + ", batch " +
         std::to_string(batch_size / std::max(1, ranks)) + "/rank, " + NameOf(precision) +
         (channels_last ? ", channels-last" : "") +
         (backend == Backend::kAuto ? "" : std::string(", ") + NameOf(backend));
}

const TuneRow* TuneTable::Chosen() const {
  for (const TuneRow& r : rows) {
    if (r.chosen) return &r;
  }
  return nullptr;
}

std::string TuneTable::ToJson() const {
  nlohmann::json j = {{"cores", cores}, {"probe_seconds", probe_seconds}, {"seconds", seconds}};
  j["rows"] = nlohmann::json::array();
  for (const TuneRow& r : rows) {
    const TuneCandidate& c = r.candidate;
    nlohmann::json row = {{"ranks", c.ranks},
                          {"threads", c.threads},
                          {"batch_size", c.batch_size},
                          {"precision", NameOf(c.precision)},
                          {"channels_last", c.channels_last},
                          {"backend", c.backend == Backend::kAuto ? "" : NameOf(c.backend)},
                          {"changes_numerics", c.changes_numerics},
                          {"samples_per_s", r.samples_per_s},
                          {"comm_fraction", r.comm_fraction},
                          {"stall_fraction", r.stall_fraction},
                          {"peak_rss_mb", r.peak_rss_mb},
                          {"chosen", r.chosen}};
    if (!r.error.empty()) row["error"] = r.error;
    j["rows"].push_back(row);
  }
  return DumpJson(j);
}

std::string TuneTable::ToText() const {
  std::string text =
      "    layout                                                    samples/s   sync  stall  peak RSS\n";
  for (const TuneRow& r : rows) {
    char line[512];
    const std::string what = r.candidate.Describe() + (r.candidate.changes_numerics ? " (numerics)" : "");
    if (!r.error.empty()) {
      std::snprintf(line, sizeof(line), "    %-56s  failed: %s\n", what.c_str(), Printable(r.error).c_str());
    } else {
      std::snprintf(line, sizeof(line), "  %c %-56s %10.0f %6s %6s %6.0f MiB\n", r.chosen ? '*' : ' ', what.c_str(),
                    r.samples_per_s, Percent(r.comm_fraction).c_str(), Percent(r.stall_fraction).c_str(),
                    r.peak_rss_mb);
    }
    text += line;
  }
  return text;
}

std::vector<std::string> ArgsFor(const std::vector<std::string>& args, const TuneCandidate& c) {
  std::vector<std::string> out = args;
  out.insert(out.end(), {"--ranks", std::to_string(c.ranks), "--threads", std::to_string(c.threads), "--batch-size",
                         std::to_string(c.batch_size), "--precision", NameOf(c.precision)});
  if (c.channels_last) out.push_back("--channels-last");
  if (c.backend != Backend::kAuto) out.insert(out.end(), {"--backend", NameOf(c.backend)});
  return out;
}

TrainConfig ConfigFor(const TrainConfig& config, const TuneCandidate& c) {
  TrainConfig t = config;
  t.dist.ranks = c.ranks;
  t.dist.threads = c.threads;
  t.optim.batch_size = c.batch_size;
  t.model.precision = c.precision;
  t.model.channels_last = c.channels_last;
  if (c.backend != Backend::kAuto) t.dist.backend = c.backend;
  return t;
}

std::vector<std::string> WithoutOptions(const std::vector<std::string>& args, const std::vector<std::string>& valued,
                                        const std::vector<std::string>& flags) {
  auto named = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (i > 0 && named(flags, name)) continue;
    if (i > 0 && named(valued, name)) {
      // and its value (an option with an optional value, like --resume, may have none)
      if (eq == std::string::npos && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) ++i;
      continue;
    }
    out.push_back(a);
  }
  return out;
}

StatusOr<TuneTable> RunTune(const TrainConfig& config, const TuneOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  TuneTable table;
  table.cores = o.cores;
  table.probe_seconds = o.seconds;

  // The fastest row so far (nullptr if none ran).
  auto best = [&]() -> TuneRow* {
    TuneRow* b = nullptr;
    for (TuneRow& r : table.rows) {
      if (r.error.empty() && (b == nullptr || r.samples_per_s > b->samples_per_s)) b = &r;
    }
    return b;
  };
  // Measures each candidate that fits and was not measured before.
  auto try_all = [&](const std::vector<TuneCandidate>& candidates) -> Status {
    for (TuneCandidate c : candidates) {
      c.changes_numerics = c.precision != config.model.precision || c.batch_size != config.optim.batch_size;
      if (!Fits(config, c, o.cores)) continue;
      const bool seen = std::any_of(table.rows.begin(), table.rows.end(),
                                    [&](const TuneRow& r) { return r.candidate.Describe() == c.Describe(); });
      if (seen) continue;
      GRANARY_ASSIGN_OR_RETURN(TuneRow row, Measure(config, c, o));
      table.rows.push_back(std::move(row));
    }
    return Status::OK();
  };

  // The user's numerics on one rank with every core; the levers below change it.
  TuneCandidate base;
  base.ranks = 1;
  base.threads = o.cores;
  base.batch_size = config.optim.batch_size;
  base.precision = config.model.precision;
  base.channels_last = config.model.channels_last;
  // 1. With --tune-numerics, bf16 first: it changes what the other levers are worth.
  if (o.numerics && o.bf16_native && base.precision == ComputeType::kFp32) {
    TuneCandidate bf16 = base;
    bf16.precision = ComputeType::kBf16;
    GRANARY_RETURN_IF_ERROR(try_all({base, bf16}));
    if (best() != nullptr) base.precision = best()->candidate.precision;
  }
  // 2. Ranks x threads over all the cores, the global batch kept; several
  // ranks over each backend when the backend is the tuner's to choose (MPI
  // moves the point where more ranks win: docs/CPU_TRAINING.md, section 7).
  std::vector<TuneCandidate> layouts;
  for (int ranks = 1; ranks <= o.cores; ++ranks) {
    if (o.cores % ranks != 0 || config.optim.batch_size % ranks != 0) continue;
    TuneCandidate c = base;
    c.ranks = ranks;
    c.threads = o.cores / ranks;
    if (ranks == 1 || !o.mpi) {
      layouts.push_back(c);
      continue;
    }
    for (const Backend backend : {Backend::kGloo, Backend::kMpi}) {
      c.backend = backend;
      layouts.push_back(c);
    }
  }
  GRANARY_RETURN_IF_ERROR(try_all(layouts));
  if (best() == nullptr) {
    if (table.rows.empty()) {
      return Status::InvalidArgument("--tune: no layout of " + std::to_string(o.cores) +
                                     " cores fits the run (its batch or flags)");
    }
    return Status::FailedPrecondition("--tune: every candidate failed; the first: " + table.rows[0].error);
  }
  // 3. Channels-last on the best layout so far.
  if (o.image_input) {
    TuneCandidate c = best()->candidate;
    c.channels_last = !c.channels_last;
    GRANARY_RETURN_IF_ERROR(try_all({c}));
  }
  // 4. With --tune-numerics, a doubled global batch.
  if (o.numerics) {
    TuneCandidate c = best()->candidate;
    c.batch_size *= 2;
    GRANARY_RETURN_IF_ERROR(try_all({c}));
  }
  best()->chosen = true;
  table.seconds = SecondsSince(start);
  return table;
}

}  // namespace granary
