#include "preprocess/build_resume.h"

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace granary {

// The builder's state for the journal: finished splits' summaries, the split
// in progress, every rejected item so far, and where to continue.
std::string CheckpointJson(const BuildSummary& summary, const SplitSummary& current, uint64_t next_item) {
  nlohmann::json j = {{"next_item", next_item},
                      {"payload_bytes", summary.payload_bytes},
                      {"current", SplitSummaryToJson(current)},
                      {"splits", nlohmann::json::array()},
                      {"rejected", nlohmann::json::array()}};
  for (const SplitSummary& s : summary.splits) j["splits"].push_back(SplitSummaryToJson(s));
  for (const RejectedItem& r : summary.rejected) j["rejected"].push_back({r.split, r.item, r.reason});
  return DumpJson(j);
}

Status RestoreCheckpoint(const std::string& text, const Schema& schema, BuildSummary* summary,
                         SplitSummary* current, uint64_t* next_item) {
  auto j = ParseJson(text);
  try {
    auto split = [&](const nlohmann::json& s) { return SplitSummaryFromJson(s, schema); };
    *next_item = j.at("next_item").get<uint64_t>();
    summary->payload_bytes = j.at("payload_bytes").get<uint64_t>();
    GRANARY_ASSIGN_OR_RETURN(*current, split(j.at("current")));
    for (const auto& s : j.at("splits")) {
      GRANARY_ASSIGN_OR_RETURN(SplitSummary done, split(s));
      summary->splits.push_back(std::move(done));
    }
    for (const auto& r : j.at("rejected")) summary->rejected.push_back({r.at(0), r.at(1), r.at(2)});
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("build journal checkpoint: ") + e.what());
  }
  return Status::OK();
}

// What must not change between an interrupted build and its --resume: the
// source (kind, path, splits with their item counts and sizes) and every
// option that shapes the records.
std::string Fingerprint(const Source& source, const BuildOptions& o, size_t block_bytes) {
  nlohmann::json j = {{"kind", source.info.kind},
                      {"path", source.info.path},
                      {"zstd_level", o.zstd_level},
                      {"dictionary", static_cast<int>(o.dictionary)},
                      {"shards", o.shards},
                      {"block_bytes", block_bytes},
                      {"options", RecordedOptions(source, o)},
                      {"splits", nlohmann::json::array()}};
  for (const auto& split : source.splits) j["splits"].push_back({split->name(), split->size(), split->raw_bytes()});
  return DumpJson(j);
}

// How these splits differ from those of the interrupted build whose
// fingerprint is `was` (Fingerprint), in words: "the files of split 'train'
// changed (49428 bytes, 47968 when interrupted)"; "" where they agree.
std::string SplitsDifference(const std::string& was, const Source& source) {
  const nlohmann::json before = ParseJson(was);
  if (!before.is_object() || !before.contains("splits") || !before["splits"].is_array()) return "";
  const nlohmann::json& splits = before["splits"];
  for (size_t k = 0; k < source.splits.size() && k < splits.size(); ++k) {
    const SplitSource& now = *source.splits[k];
    const nlohmann::json& then = splits[k];
    if (!then.is_array() || then.size() != 3 || then[0] != now.name()) return "";
    const std::string name = "split '" + now.name() + "'";
    if (then[1] != now.size()) {
      return name + " has " + std::to_string(now.size()) + " items, " + then[1].dump() +
             " when interrupted (files added or removed)";
    }
    if (then[2] != now.raw_bytes()) {
      return "the files of " + name + " changed (" + std::to_string(now.raw_bytes()) + " bytes, " + then[2].dump() +
             " when interrupted)";
    }
  }
  return "";
}

}  // namespace granary
