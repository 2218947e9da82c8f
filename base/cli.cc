#include "base/cli.h"

#include <algorithm>
#include <cctype>
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

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A flag as typed in any case, '_' for '-', without its "=value".
std::string Normalized(const std::string& flag) {
  std::string out;
  for (char c : flag.substr(0, flag.find('='))) {
    out += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

std::string UnknownFlagAdvice(const std::vector<std::string>& unexpected, const std::vector<std::string>& known,
                              const std::map<std::string, std::string>& aliases) {
  std::string advice;
  for (const std::string& given : unexpected) {
    if (given.size() < 3 || given.compare(0, 2, "--") != 0) continue;
    const std::string flag = Normalized(given);
    std::string meant;
    if (const auto alias = aliases.find(flag); alias != aliases.end()) {
      meant = alias->second.compare(0, 2, "--") == 0 ? "did you mean " + alias->second + "?" : alias->second;
    } else {
      size_t best = 3;
      for (const std::string& name : known) {
        const size_t d = Normalized(name) == flag ? 0 : EditDistance(flag, name);
        if (d < best) best = d, meant = "did you mean " + name + "?";
      }
    }
    if (!meant.empty()) advice += "; " + given.substr(0, given.find('=')) + ": " + meant;
  }
  return advice;
}

void ExitAtOnce(int status) {
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace granary
