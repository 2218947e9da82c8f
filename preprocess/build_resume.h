// What an interrupted `prep build` keeps of its own state in the db's build
// journal (store/build_journal.h), and what its --resume must match: the
// builder's checkpoint (finished splits, the split in progress, the rejected
// items, where to continue) and the fingerprint of the source and options.
// Private to preprocess/build.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "preprocess/build.h"
#include "preprocess/source.h"
#include "store/schema.h"

namespace granary {

// The builder's state for the journal, and back: Corruption for a
// checkpoint that is not one.
std::string CheckpointJson(const BuildSummary& summary, const SplitSummary& current, uint64_t next_item);
Status RestoreCheckpoint(const std::string& text, const Schema& schema, BuildSummary* summary,
                         SplitSummary* current, uint64_t* next_item);

// What must not change between an interrupted build and its --resume.
std::string Fingerprint(const Source& source, const BuildOptions& o, size_t block_bytes);

// How `source`'s splits differ from those of the interrupted build whose
// fingerprint is `was`, in words; "" where they agree.
std::string SplitsDifference(const std::string& was, const Source& source);

}  // namespace granary
