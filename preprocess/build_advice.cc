#include "preprocess/build_advice.h"

#include <cerrno>
#include <cstring>

#include "preprocess/build.h"
#include "preprocess/csv_columns.h"

namespace granary {

std::string MissingValuesAdvice(const std::string& missing, const std::string& failure) {
  if (missing != "reject" || failure.find(kMissingValue) == std::string::npos) return "";
  return "; a row with a missing value is kept by building again with --missing nan (train takes a missing value "
         "as its feature's mean) or --missing zero";
}

std::string PartialAdvice(const std::string& db, const std::string& missing, const std::string& failure) {
  if (failure.find(std::strerror(ENOSPC)) != std::string::npos) {
    return ": free space on its disk, then add --resume to continue, or delete " + db + ".partial";
  }
  if (failure.find(kMoreThanMaxRejects) == std::string::npos) return ": add --resume to continue";
  return ": add --resume and a larger --max-rejects to finish it without the rejected items, or fix or remove them "
         "and build again" + MissingValuesAdvice(missing, failure);
}

}  // namespace granary
