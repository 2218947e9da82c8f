#include "store/build_journal.h"

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "store/db_directory.h"
#include "store/format.h"

namespace granary {
namespace {

// A journal read only for its resume_with: past this, a message does without.
constexpr uint64_t kMaxJournalBytes = uint64_t{16} << 20;

}  // namespace

AtomicWriteOptions InPartial() {
  AtomicWriteOptions o;
  o.through_links = false;
  return o;
}

Status WriteBuildJournal(const std::string& partial, const JournalEntry& entry) {
  Manifest finished;
  finished.format_version = format::kFormatVersion;
  finished.schema = entry.schema;
  finished.splits = entry.finished;
  nlohmann::json j = {{"fingerprint", entry.fingerprint},
                      {"finished", ParseJson(ManifestToJson(finished))},
                      {"split", entry.split},
                      {"samples", entry.samples},
                      {"checkpoint", entry.checkpoint},
                      {"dictionary", entry.dictionary},
                      {"builder", entry.builder},
                      {"resume_with", entry.resume_with}};
  return WriteFileAtomically(partial + "/" + kJournalFile, DumpJson(j), InPartial());
}

std::string ResumeCommandOf(const std::string& partial) {
  std::string text;
  if (!ReadBoundedFile(partial + "/" + kJournalFile, kMaxJournalBytes, &text).ok()) return "";
  const nlohmann::json j = ParseJson(text);
  if (!j.is_object() || !j.contains("resume_with") || !j["resume_with"].is_string()) return "";
  return j["resume_with"].get<std::string>();
}

Status ReadBuildJournal(const std::string& partial, ResumePoint* resume) {
  const std::string journal_path = partial + "/" + kJournalFile;
  std::string text;
  GRANARY_RETURN_IF_ERROR(ReadFile(journal_path, &text));
  nlohmann::json j = ParseJson(text);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(journal_path + ": " + WhyNotJson(text));
  try {
    auto finished = ParseManifest(DumpJson(j.at("finished")), journal_path);
    if (!finished.ok()) return finished.status();
    resume->finished = finished->splits;
    resume->split = j.at("split").get<std::string>();
    resume->samples = j.at("samples").get<uint64_t>();
    resume->checkpoint = j.at("checkpoint").get<std::string>();
    resume->fingerprint = j.at("fingerprint").get<std::string>();
    // Journals before these keys were all prep's.
    resume->builder = j.value("builder", std::string("prep build"));
    resume->resume_with = j.value("resume_with", std::string("prep build --resume"));
    if (j.at("dictionary").get<bool>()) {
      GRANARY_RETURN_IF_ERROR(ReadFile(partial + "/" + format::kDictionaryFile, &resume->dictionary));
      if (resume->dictionary.empty()) return Status::Corruption(partial + ": dictionary is empty");
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(journal_path + ": " + e.what());
  }
  return Status::OK();
}

}  // namespace granary
