// Helpers shared by granary's tests: temporary directories and running the
// prep/train executables.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace granary::testing {

// The names of the entries of directory `dir` (no path).
inline std::set<std::string> FileNames(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A fresh directory removed (with its contents) when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "granary-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `command` through /bin/sh, capturing stdout and stderr.
inline CommandResult RunCommand(const std::string& command, const TempDir& scratch) {
  const std::string out = scratch.Sub(".stdout"), err = scratch.Sub(".stderr");
  int status = std::system((command + " >" + out + " 2>" + err + " </dev/null").c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

// A failed command that said why in one line on stderr, naming `needle`.
inline void ExpectOneLineError(const CommandResult& r, const std::string& needle) {
  SCOPED_TRACE("expecting one line naming: " + needle);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
}

// Scripts the Python module class `Net` that `class_source` defines (torch
// imported) with Debian's python3-torch and saves it at `path`; what python3
// said if it failed, else "". (TorchScript reads the class's source, so it
// goes through a file.)
inline std::string SaveScriptedNet(const std::string& class_source, const std::string& path, const TempDir& dir) {
  WriteFile(dir.Sub("make_net.py"),
            "import torch\n" + class_source + "torch.jit.script(Net()).save('" + path + "')\n");
  CommandResult made = RunCommand("/usr/bin/python3 " + dir.Sub("make_net.py"), dir);
  return made.exit_code == 0 ? "" : made.err + " (exit " + std::to_string(made.exit_code) + ")";
}

// A TCP port on 127.0.0.1 that was free a moment ago, or 0.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return bound ? ntohs(addr.sin_port) : 0;
}

}  // namespace granary::testing
