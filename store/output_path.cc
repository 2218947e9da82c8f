#include "store/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/file.h"
#include "store/db_directory.h"
#include "store/format.h"

namespace granary {
namespace {

namespace fs = std::filesystem;

// How much of a manifest is read to find its format's name: enough for any
// manifest's leading keys, bounded for one that is huge.
constexpr size_t kManifestSniffBytes = 1 << 20;

Status Refused(const OutputPath& o, const std::string& why) {
  return Status::InvalidArgument(o.flag + " " + o.path + ": " + why);
}

// Where an output goes: absolute, every symlink resolved.
struct Target {
  fs::path path;
  bool exists = false;
  struct stat st {};  // when it exists
};

std::string Reason(int err) { return std::strerror(err); }

// Resolves `o`. An existing path (a symlink followed to what it names) must
// resolve; a missing file's directory must exist; a missing directory's
// nearest existing ancestor must be a directory (it is created with its parents).
StatusOr<Target> Resolve(const OutputPath& o) {
  std::error_code error;
  const fs::path absolute = fs::absolute(o.path, error);
  if (error || o.path.empty()) return Refused(o, "not a usable path");
  Target t;
  struct stat link;
  if (::lstat(absolute.c_str(), &link) == 0) {
    char* real = ::realpath(absolute.c_str(), nullptr);
    if (real == nullptr && ::stat(absolute.c_str(), &t.st) == 0) {  // a link to a pipe or socket (/proc/self/fd/N)
      t.path = absolute;
      t.exists = true;
      return t;
    }
    if (real == nullptr) {
      const int err = errno;
      if (err == ELOOP) return Refused(o, "is a symlink loop");
      if (err == ENOENT) return Refused(o, "is a symlink to a missing file (granary does not replace the link)");
      return Refused(o, "cannot be resolved (" + Reason(err) + ")");
    }
    t.path = real;
    std::free(real);
    if (::stat(t.path.c_str(), &t.st) != 0) return Refused(o, "cannot be read (" + Reason(errno) + ")");
    t.exists = true;
    return t;
  }
  if (errno == ELOOP) return Refused(o, "runs through a symlink loop");
  if (errno != ENOENT) return Refused(o, "cannot be reached (" + Reason(errno) + ")");
  // Missing: resolve the part of it that exists.
  fs::path existing = absolute.parent_path();
  fs::path rest = absolute.filename();
  while (o.kind == OutputKind::kDirectory && !fs::exists(existing, error) && existing.has_relative_path()) {
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
  char* real = ::realpath(existing.c_str(), nullptr);
  if (real == nullptr) return Refused(o, "no directory " + existing.string() + " (" + Reason(errno) + ")");
  t.path = fs::path(real) / rest;
  std::free(real);
  if (!fs::is_directory(t.path.parent_path(), error) && o.kind != OutputKind::kDirectory) {
    return Refused(o, t.path.parent_path().string() + " is not a directory");
  }
  return t;
}

// The first bytes of the regular file `path` (at most `n`).
std::string Head(const fs::path& path, size_t n) {
  std::string head(n, '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return head;
}

// Whether a non-empty file that starts with `head` is of `kind`.
bool HeadIsOfKind(const std::string& head, OutputKind kind) {
  const size_t text = head.find_first_not_of(" \t\r\n");
  switch (kind) {
    case OutputKind::kModel:
      return head.rfind(std::string("PK\x03\x04", 4), 0) == 0;  // TorchScript writes a zip
    case OutputKind::kJsonLines:
      return text != std::string::npos && head[text] == '{';
    case OutputKind::kHtml:
      return IsHtmlPage(head);
    case OutputKind::kPng:
      return head.rfind("\x89PNG\r\n\x1a\n", 0) == 0;
    case OutputKind::kDirectory:
    case OutputKind::kDb:
    case OutputKind::kStdout:
      return true;
  }
  return false;
}

const char* KindName(OutputKind kind) {
  switch (kind) {
    case OutputKind::kModel: return "a TorchScript model";
    case OutputKind::kJsonLines: return "JSON lines";
    case OutputKind::kHtml: return "an HTML page";
    case OutputKind::kPng: return "a PNG image";
    case OutputKind::kDirectory: return "a directory";
    case OutputKind::kDb: return "a db";
    case OutputKind::kStdout: return "output";
  }
  return "?";
}

// What is there already may be replaced (or written through) by `o`.
Status CheckExisting(const OutputPath& o, const Target& t) {
  const mode_t mode = t.st.st_mode;
  if (o.kind == OutputKind::kStdout || o.kind == OutputKind::kDb) return Status::OK();
  if (o.kind == OutputKind::kDirectory) {
    if (!S_ISDIR(mode)) return Refused(o, std::string("is ") + FileTypeName(mode) + ", not a directory");
    return Status::OK();
  }
  const bool streamed = o.kind == OutputKind::kJsonLines && (S_ISCHR(mode) || S_ISFIFO(mode));
  if (streamed) return Status::OK();
  if (!S_ISREG(mode)) {
    return Refused(o, std::string("is ") + FileTypeName(mode) + "; granary writes " + o.flag +
                          " only as a regular file and does not replace this one");
  }
  if (t.st.st_size > 0 && !HeadIsOfKind(Head(t.path, 64), o.kind)) {
    return Refused(o, std::string("holds something other than ") + KindName(o.kind) + "; refusing to replace it");
  }
  return Status::OK();
}

// `dir`, or the first directory above it, that is a db; empty if none.
fs::path EnclosingDb(fs::path dir) {
  for (;; dir = dir.parent_path()) {
    if (IsDbOrPartial(dir.string())) return dir;
    if (!dir.has_relative_path()) return {};
  }
}

bool SameFile(const Target& a, const struct stat& b) {
  return a.exists && a.st.st_dev == b.st_dev && a.st.st_ino == b.st_ino;
}

// A file can be created in `dir` (one is, then removed).
Status ProbeDirectory(const OutputPath& o, const fs::path& dir) {
  std::string name = (dir / ".granary-probe-XXXXXX").string();
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return Refused(o, "cannot create files in " + dir.string() + " (" + Reason(errno) + ")");
  ::close(fd);
  ::unlink(name.c_str());
  return Status::OK();
}

// A file can be written where `o` goes.
Status ProbeWritable(const OutputPath& o, const Target& t) {
  switch (o.kind) {
    case OutputKind::kStdout:
      return Status::OK();
    case OutputKind::kDb:  // built beside itself, as DB.partial
      return ProbeDirectory(o, t.path.parent_path());
    case OutputKind::kDirectory: {
      fs::path dir = t.path;
      std::error_code error;
      while (!fs::exists(dir, error) && dir.has_relative_path()) dir = dir.parent_path();
      if (!fs::is_directory(dir, error)) return Refused(o, dir.string() + " is not a directory");
      return ProbeDirectory(o, dir);
    }
    case OutputKind::kJsonLines:  // written in place
      if (t.exists && ::access(t.path.c_str(), W_OK) != 0) return Refused(o, "is not writable (" + Reason(errno) + ")");
      if (t.exists) return Status::OK();
      return ProbeDirectory(o, t.path.parent_path());
    default:  // replaced by a rename from beside it
      return ProbeDirectory(o, t.path.parent_path());
  }
}

}  // namespace

bool IsDbOrPartial(const std::string& dir) {
  std::error_code error;
  const fs::path d(dir);
  if (fs::exists(d / format::kBuilderFile, error)) return true;
  const fs::path manifest = d / format::kManifestFile;
  if (!fs::exists(manifest, error)) return false;
  if (Head(manifest, kManifestSniffBytes).find(std::string("\"") + format::kFormatName + "\"") != std::string::npos) {
    return true;
  }
  // A manifest that no longer says so (damaged, emptied) beside a split's shards.
  for (const fs::directory_entry& e : fs::directory_iterator(d, error)) {
    if (e.is_directory(error) && fs::exists(e.path() / "shard-00000.mdb", error)) return true;
  }
  return false;
}

std::optional<OutputPath> RedirectedStdout() {
  struct stat st;
  if (::fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/fd/1", path, sizeof(path) - 1);
  if (n <= 0 || path[0] != '/') return std::nullopt;
  return OutputPath{"stdout", std::string(path, static_cast<size_t>(n)), OutputKind::kStdout};
}

Status CheckOutputs(const std::vector<OutputPath>& outputs, const std::vector<FlagPath>& inputs) {
  std::vector<std::pair<const OutputPath*, Target>> checked;
  for (const OutputPath& o : outputs) {
    if (o.path.empty()) continue;
    GRANARY_ASSIGN_OR_RETURN(const Target t, Resolve(o));
    const bool is_dir = o.kind == OutputKind::kDirectory && t.exists;
    if (const fs::path db = EnclosingDb(is_dir ? t.path : t.path.parent_path()); !db.empty()) {
      return Refused(o, (db == t.path ? "is the db " : "is inside the db ") + db.string() +
                            "; granary never writes into a db");
    }
    if (t.exists) GRANARY_RETURN_IF_ERROR(CheckExisting(o, t));
    for (const FlagPath& in : inputs) {
      if (in.path.empty()) continue;
      struct stat st;
      char* real = ::realpath(in.path.c_str(), nullptr);
      if (real == nullptr || ::stat(real, &st) != 0) {
        std::free(real);
        continue;
      }
      const fs::path input(real);
      std::free(real);
      if (SameFile(t, st) || t.path == input) return Refused(o, "is the input " + in.flag + " " + in.path);
      // Stdout, made by the shell, adds no file to an input folder it is in.
      if (S_ISDIR(st.st_mode) && IsWithin(t.path, input) && o.kind != OutputKind::kStdout) {
        return Refused(o, "is inside the input " + in.flag + " " + in.path);
      }
    }
    for (const auto& [other, other_target] : checked) {
      if (other_target.path == t.path || (other_target.exists && SameFile(t, other_target.st))) {
        return Refused(o, "is also " + other->flag + "; each output needs a path of its own");
      }
    }
    GRANARY_RETURN_IF_ERROR(ProbeWritable(o, t));
    checked.emplace_back(&o, t);
  }
  return Status::OK();
}

}  // namespace granary
