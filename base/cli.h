// What granary's command-line mains (prep, loader, train) share: how a
// failure ends them.
#pragma once

#include <string_view>

#include "base/status.h"

namespace granary {

// "PROGRAM: message" on stderr, one line (the message's odd bytes escaped:
// json_text.h's Printable), flushed; returns 1, the exit status of a failed
// run. `context` (if not empty) goes before the message: "rank 1".
int PrintFailure(std::string_view program, const Status& status, std::string_view context = {});

// Ends the process now with `status`, stdio flushed, without static
// destructors or atexit handlers: for when a thread still runs code that
// they would pull from under it (a model's dry forward past --timeout).
[[noreturn]] void ExitAtOnce(int status);

}  // namespace granary
