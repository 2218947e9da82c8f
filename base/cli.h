// What granary's command-line mains (prep, loader, train) share: how a
// failure ends them.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace granary {

// "PROGRAM: message" on stderr, one line (the message's odd bytes escaped:
// json_text.h's Printable), flushed; returns 1, the exit status of a failed
// run. `context` (if not empty) goes before the message: "rank 1".
int PrintFailure(std::string_view program, const Status& status, std::string_view context = {});

// For a command line's unexpected arguments (`unexpected`: CLI11's
// remaining ones), what the flags among them were likely meant as, from the
// program's `known` long flags: "; --batch_size: did you mean --batch-size?"
// for each flag that `aliases` maps (PyTorch's habits: "--num-workers" ->
// "--loader-threads"; a mapping to a sentence, not a flag, is said as it is),
// that matches a known flag but for case and '_', or lies within two edits
// of one; "" where none does.
std::string UnknownFlagAdvice(const std::vector<std::string>& unexpected, const std::vector<std::string>& known,
                              const std::map<std::string, std::string>& aliases = {});

// Ends the process now with `status`, stdio flushed, without static
// destructors or atexit handlers: for when a thread still runs code that
// they would pull from under it (a model's dry forward past --timeout).
[[noreturn]] void ExitAtOnce(int status);

}  // namespace granary
