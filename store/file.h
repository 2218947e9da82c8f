// Whole-file reads with errors as Status. Thread-safe.
#pragma once

#include <string>

#include "store/status.h"

namespace granary {

// Replaces *out with the contents of `path`. NotFound if it does not exist,
// IOError (with errno) if it cannot be opened or read. Reuses *out's capacity.
Status ReadFile(const std::string& path, std::string* out);

}  // namespace granary
