// prep build --like DB: RAW read as DB was read, so that a model trained on
// DB reads the new db's samples as it read DB's: the same classes in the same
// order (a held-out folder or table that lacks one would number the others
// otherwise), a table's same feature columns and one-hot categories (one of
// other values would put other columns in their places), and the options
// that shape a sample (a table's label, --regression and --missing, an image
// folder's --size and --channels).
#pragma once

#include <string>

#include "base/status.h"
#include "preprocess/source.h"

namespace granary {

// DB's classes and feature names, its build options taken into *raw where
// they shape a sample: a flag in raw->given must agree with DB's
// (InvalidArgument naming the flag and both values). RAW of `format` must be
// of DB's kind where DB's features are a table's, and DB must name classes
// where it is to give them.
StatusOr<LikeDb> TakeLikeDb(const std::string& format, RawOptions* raw);

}  // namespace granary
