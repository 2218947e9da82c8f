#include "trainer/command/command_tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "trainer/clock.h"

namespace granary {

std::string CommandCandidate::Describe() const {
  return std::to_string(ranks) + " x " + std::to_string(threads) + (pin ? ", pinned, " : ", not pinned, ") +
         NameOf(allocator);
}

const CommandTuneRow* CommandTuneTable::Chosen() const {
  for (const CommandTuneRow& row : rows) {
    if (row.chosen) return &row;
  }
  return nullptr;
}

std::string CommandTuneTable::ToJson() const {
  nlohmann::json j = {{"cores", cores}, {"seconds", seconds}, {"ranks_varied", ranks_varied}};
  j["rows"] = nlohmann::json::array();
  for (const CommandTuneRow& r : rows) {
    nlohmann::json row = {{"ranks", r.candidate.ranks},
                          {"threads", r.candidate.threads},
                          {"pin", r.candidate.pin},
                          {"allocator", NameOf(r.candidate.allocator)},
                          {"steps_per_s", r.probe.steps_per_s},
                          {"seconds", r.probe.seconds},
                          {"chosen", r.chosen}};
    if (!r.probe.error.empty()) row["error"] = r.probe.error;
    j["rows"].push_back(row);
  }
  return DumpJson(j);
}

std::string CommandTuneTable::ToText() const {
  double best = 0;
  for (const CommandTuneRow& r : rows) best = std::max(best, r.probe.steps_per_s);
  std::string out = "  ranks x threads, pinning, allocator      steps/s (all ranks)   vs best\n";
  for (const CommandTuneRow& r : rows) {
    char line[160];
    if (!r.probe.error.empty()) {
      std::snprintf(line, sizeof(line), "  %-40s failed: %s\n", r.candidate.Describe().c_str(), r.probe.error.c_str());
    } else {
      std::snprintf(line, sizeof(line), "%s %-40s %10.2f %17.2f\n", r.chosen ? "*" : " ",
                    r.candidate.Describe().c_str(), r.probe.steps_per_s, best > 0 ? r.probe.steps_per_s / best : 0.0);
    }
    out += line;
  }
  return out;
}

StatusOr<CommandTuneTable> TuneCommand(const CommandTuneOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  CommandTuneTable table;
  table.cores = o.cores;
  table.ranks_varied = o.ranks == 0;
  auto best = [&]() -> CommandTuneRow* {
    CommandTuneRow* b = nullptr;
    for (CommandTuneRow& r : table.rows) {
      if (r.probe.error.empty() && (b == nullptr || r.probe.steps_per_s > b->probe.steps_per_s)) b = &r;
    }
    return b;
  };
  auto measure = [&](const CommandCandidate& c) -> Status {
    GRANARY_ASSIGN_OR_RETURN(CommandProbe probe, o.run_probe(c));
    // A command that shows no steps at all cannot be tuned: said once, at its first probe.
    if (table.rows.empty() && probe.steps_per_s <= 0 && !probe.error.empty()) {
      return Status::FailedPrecondition("--tune: " + probe.error);
    }
    table.rows.push_back({c, probe, false});
    return Status::OK();
  };
  // 1. Ranks x threads over every core; with --ranks given, that many ranks
  // with fewer threads each too (a small model may do better with fewer).
  if (o.ranks == 0) {
    for (int ranks = 1; ranks <= o.cores; ++ranks) {
      if (o.cores % ranks == 0) GRANARY_RETURN_IF_ERROR(measure({ranks, o.cores / ranks}));
    }
  } else {
    for (int threads = std::max(1, o.cores / o.ranks);; threads /= 2) {
      GRANARY_RETURN_IF_ERROR(measure({o.ranks, threads, o.ranks * threads <= o.cores}));
      if (threads == 1) break;
    }
  }
  if (best() == nullptr) {
    return Status::FailedPrecondition("--tune: every layout failed; the first: " + table.rows[0].probe.error);
  }
  // 2. Pinning off, on the best layout.
  if (best()->candidate.pin) {
    CommandCandidate c = best()->candidate;
    c.pin = false;
    GRANARY_RETURN_IF_ERROR(measure(c));
  }
  // 3. The allocators, on the best so far.
  for (const Allocator allocator : o.allocators) {
    if (allocator == Allocator::kGlibc) continue;
    CommandCandidate c = best()->candidate;
    c.allocator = allocator;
    GRANARY_RETURN_IF_ERROR(measure(c));
  }
  best()->chosen = true;
  table.seconds = SecondsSince(start);
  return table;
}

}  // namespace granary
