#include "store/db_directory.h"

#include "base/file.h"
#include "store/format.h"

namespace granary {

namespace fs = std::filesystem;

fs::path Resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::absolute(path, ec).lexically_normal() : p;
}

bool IsWithin(const fs::path& inner, const fs::path& outer) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

Status CheckApartFromInputs(const std::string& out, const std::vector<std::string>& inputs) {
  const fs::path o = Resolved(out);
  for (const std::string& input : inputs) {
    const fs::path in = Resolved(input);
    if (IsWithin(in, o)) {
      return Status::InvalidArgument(out + ": is or contains the input " + input + "; refusing to write there");
    }
  }
  return Status::OK();
}

bool IsBuildLeftover(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir + "/" + format::kBuilderFile, ec) || fs::exists(dir + "/" + kJournalFile, ec)) return true;
  return fs::is_empty(dir, ec) && !ec;
}

std::string BuilderOf(const std::string& dir) {
  std::string text;
  if (!ReadFile(dir + "/" + format::kBuilderFile, &text).ok()) return "?";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "?" : text;
}

Status EmptyDirectory(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    fs::remove_all(it->path(), ec);
    if (ec) return Status::IOError(it->path().string(), "remove stale partial file", ec.value());
  }
  if (ec) return Status::IOError(dir, "list stale partial directory", ec.value());
  return Status::OK();
}

}  // namespace granary
