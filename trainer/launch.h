// Starting rank processes on this machine: each is this executable again, run
// with the same arguments plus "--rank R --port P". Call from the main thread
// before any LMDB environment or thread pool exists in this process.
#pragma once

#include <string>
#include <vector>

#include "store/status.h"

namespace granary {

// A TCP port on 127.0.0.1 that was free a moment ago.
StatusOr<int> PickFreePort();

// Runs `world` rank processes and waits for them. If one fails, the others are
// terminated. Returns the first non-zero exit status (or 128 + signal), or 0.
StatusOr<int> LaunchRanks(const std::vector<std::string>& args, int world, int port);

}  // namespace granary
