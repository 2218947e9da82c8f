#include "store/file.h"

#include <cerrno>
#include <cstdio>
#include <memory>

namespace granary {

Status ReadFile(const std::string& path, std::string* out) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IOError(path, "open", errno);
  }
  out->clear();
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f.get())) > 0;) out->append(buf, n);
  if (std::ferror(f.get())) return Status::IOError(path, "read", errno);
  return Status::OK();
}

}  // namespace granary
