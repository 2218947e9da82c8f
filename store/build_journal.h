// The build journal, "<db>.partial/journal.json" (kJournalFile): what a build
// has safely written, read back by --resume. Only DbWriter writes it; docs/
// FORMAT.md does not cover it (it never lies in a finished db). Internal to store.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/status.h"
#include "store/db_writer.h"
#include "store/manifest.h"

namespace granary {

// The build's own files in its partial directory: never written through a link.
AtomicWriteOptions InPartial();

struct JournalEntry {
  std::string fingerprint;          // what must not change for a --resume (DbWriter::StartJournal)
  Schema schema;
  std::vector<SplitInfo> finished;  // splits completed
  std::string split;                // the split in progress ("" if none)
  uint64_t samples = 0;             // its samples committed
  std::string checkpoint;           // the caller's state
  bool dictionary = false;          // the partial directory holds the dictionary file
  std::string builder;              // DbWriterOptions::builder
  std::string resume_with;          // DbWriterOptions::resume_with
};

// Replaces the journal in `partial` (atomically).
Status WriteBuildJournal(const std::string& partial, const JournalEntry& entry);

// What continues the interrupted build in `partial` (its journal's
// resume_with), or "" where there is no journal to say.
std::string ResumeCommandOf(const std::string& partial);

// Reads the journal in `partial` into *resume (all but `resuming`), with the
// dictionary file's bytes where it says there is one. Corruption naming the
// file for a journal that is not one.
Status ReadBuildJournal(const std::string& partial, ResumePoint* resume);

}  // namespace granary
