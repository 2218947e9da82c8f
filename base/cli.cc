#include "base/cli.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/json_text.h"

namespace granary {

int PrintFailure(std::string_view program, const Status& status, std::string_view context) {
  std::string line(program);
  line += ": ";
  if (!context.empty()) {
    line += context;
    line += ": ";
  }
  line += Printable(status.message());
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  return 1;
}

void ExitAtOnce(int status) {
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace granary
