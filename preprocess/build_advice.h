// What prep says to do after a build failed, beside why it failed.
#pragma once

#include <string>

namespace granary {

// Where a table's rows were rejected for a missing feature value (`failure`
// names one) under --missing `missing` reject: "; ..." naming the flag that
// keeps them (a row without its label has nothing to keep); "" otherwise.
std::string MissingValuesAdvice(const std::string& missing, const std::string& failure);

// What to do with DB.partial (of `db`) after a build failed with `failure`:
// free space, finish it without the rejected items, or resume; ": ...".
std::string PartialAdvice(const std::string& db, const std::string& missing, const std::string& failure);

}  // namespace granary
