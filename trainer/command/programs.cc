#include "trainer/command/programs.h"

#include <unistd.h>

#include <algorithm>

namespace granary {

// The program COMMAND names, as execve needs it: a path, or found on PATH;
// "" if there is none to run.
std::string FindProgram(const std::string& name, const Environment& env) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const std::string path = env.Get("PATH", "/usr/local/bin:/usr/bin:/bin");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = end > start ? path.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// The script a Python interpreter's command line runs (`python3 -u train.py
// ...`: "train.py"), or "" where it runs none from a file (-c, -m, stdin, a
// REPL) or `command` starts no Python interpreter.
std::string PythonScriptOf(const std::vector<std::string>& command) {
  if (command.empty() || command[0].substr(command[0].find_last_of('/') + 1).rfind("python", 0) != 0) return "";
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& arg = command[i];
    if (arg == "-" || arg.rfind("-c", 0) == 0 || arg.rfind("-m", 0) == 0) return "";
    if (arg == "-W" || arg == "-X" || arg == "--check-hash-based-pycs") {
      ++i;  // its value follows
      continue;
    }
    if (arg.empty() || arg[0] != '-') return arg;
  }
  return "";
}

// The shared library of `allocator` ("" for glibc's own, or if not installed).
std::string AllocatorLibrary(Allocator allocator) {
  const char* file = allocator == Allocator::kJemalloc   ? "libjemalloc.so.2"
                     : allocator == Allocator::kTcmalloc ? "libtcmalloc_minimal.so.4"
                                                         : nullptr;
  if (file == nullptr) return "";
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                          "/usr/local/lib"}) {
    const std::string path = std::string(dir) + "/" + file;
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

// The folder of granary's startup module (sitecustomize.py: it counts a
// Python rank's training steps on its heartbeat), beside this program;
// "" if it is not there.
// Looked up once: every probe and start asks.
const std::string& StartupModuleDir() {
  static const std::string found = [] {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return std::string();
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/')) + "/launch_site";
    return ::access((dir + "/sitecustomize.py").c_str(), R_OK) == 0 ? dir : std::string();
  }();
  return found;
}

}  // namespace granary
