// Where a command may write. Every output of granary (a model, metrics, a
// report, a checkpoint directory, a PNG, stdout redirected to a file) is
// checked before any work starts, so that a long run is not lost to an
// unwritable path found at its end, and no output replaces what is not its
// own: nothing is written inside a db, onto an input or another output of
// the same command, over an existing file of another kind, or over a device,
// FIFO or socket. Stateless and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace granary {

// What an output holds: an existing file is replaced only by its own kind.
enum class OutputKind {
  kModel,      // a TorchScript archive (a zip), replaced atomically
  kJsonLines,  // JSON lines written in place; a terminal, pipe or device is written through
  kHtml,       // an HTML page, replaced atomically
  kPng,        // a PNG image, replaced atomically
  kDirectory,  // a directory the command creates its own files in (checkpoints)
  kDb,         // a db prep builds: what may be replaced there is the builder's call (store/db_writer.h)
  kStdout,     // stdout redirected to a file: the shell made it, only its place is checked
};

// A path a command was given and the flag (or argument) that gave it; both
// are named in every refusal.
struct FlagPath {
  std::string flag;
  std::string path;
};

struct OutputPath {
  std::string flag;
  std::string path;  // empty: not asked for, skipped
  OutputKind kind;
};

// OK if every output may be written: after following symlinks (a link to a
// file is written through, so the link stays), it is not inside a db (see
// IsDbOrPartial), not one of `inputs` nor inside an input that is a
// directory, not the same file as another output, an existing file is of its
// kind (regular, and its first bytes those of its kind, or empty), and a file
// can be created where it goes (a temporary file is created and removed).
// InvalidArgument naming the flag and the path otherwise, in one line.
Status CheckOutputs(const std::vector<OutputPath>& outputs, const std::vector<FlagPath>& inputs);

// Stdout as an output to check (named "stdout"), if it is redirected to a regular file.
std::optional<OutputPath> RedirectedStdout();

// Whether directory `dir` is a granary db or one being built: it holds a
// manifest naming the granary-db format or a split's first shard beside a
// manifest, or a build's mark (a partial directory).
bool IsDbOrPartial(const std::string& dir);

}  // namespace granary
