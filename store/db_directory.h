// The directories a build owns: where a db may be written (apart from its
// inputs), and a partial directory's leftovers (docs/FORMAT.md, "Directory
// layout"). Internal to store; stateless.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

// "<db>.partial/journal.json": what an interrupted build has safely written.
inline constexpr char kJournalFile[] = "journal.json";

// `path` made absolute and normal, with symlinks resolved as far as it exists.
std::filesystem::path Resolved(const std::string& path);

// Whether `inner` is `outer` or lies below it (both absolute and normal).
bool IsWithin(const std::filesystem::path& inner, const std::filesystem::path& outer);

// InvalidArgument if `out` (the db or its partial directory) is an input or
// contains one: replacing or clearing `out` would destroy the input. (A db
// inside an input folder is allowed: sources list their files before the
// build writes anything.)
Status CheckApartFromInputs(const std::string& out, const std::vector<std::string>& inputs);

// Whether a partial directory found at `dir` (not locked by anyone) is a
// build's leftover, which may be emptied: it holds the builder mark or a
// journal (builds before the mark), or nothing at all.
bool IsBuildLeftover(const std::string& dir);

// The process id in a locked partial directory's builder mark, or "?".
std::string BuilderOf(const std::string& dir);

// Removes what `dir` holds, keeping `dir` itself (and so its lock).
Status EmptyDirectory(const std::string& dir);

}  // namespace granary
