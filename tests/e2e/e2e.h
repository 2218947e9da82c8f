// What the end-to-end suites share: the prep, train and loader executables,
// the real Fashion-MNIST files tools/setup installs, a fixture with a scratch
// folder, and helpers for the commands every suite runs.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/file.h"
#include "base/json_text.h"
#include "tests/test_util.h"

namespace granary {

namespace fs = std::filesystem;
using testing::ExpectOneLineError;
using testing::FreePort;
using testing::RunCommand;
using testing::TempDir;

inline const char kFashion[] = "/usr/share/datasets/fashion-mnist";
inline const std::string kPrep = GRANARY_PREP_BIN;
inline const std::string kTrain = GRANARY_TRAIN_BIN;
inline const std::string kLoader = GRANARY_LOADER_BIN;
inline const std::string kLaunch = GRANARY_LAUNCH_BIN;

class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fs::exists(kFashion)) << kFashion << " is missing: run tools/setup"; }
  TempDir dir_;
};

// Shell: wait (up to 60 s) until `metrics` (a run's --metrics file, with
// --log-every 1) has a step line: the run is training, however slowly a
// loaded machine started it. A test that stops or kills a rank waits for
// this, not for a fixed time.
inline std::string WaitForFirstStep(const std::string& metrics) {
  return "for i in $(seq 600); do grep -q step " + metrics + " 2>/dev/null && break; sleep 0.1; done; ";
}

// Shell: wait (up to 20 s) until no process matches `pattern` (pgrep -f),
// then print "left N" (N of them still there).
inline std::string EchoLeftAfterWaiting(const std::string& pattern) {
  return "for i in $(seq 200); do [ \"$(pgrep -c -f " + pattern + ")\" = 0 ] && break; sleep 0.1; done; " +
         "echo left $(pgrep -c -f " + pattern + "); ";
}

// A cgroup of the test's own, `name`, under v1's `controller` ("cpu",
// "memory") with `v1` files written, or, where v1 has no such controller,
// under v2's root with `v2` files written; the cgroup.procs file a process
// joins it by, or "" where this process may not make one (not root, no such
// controller). Remove its folder (fs::remove) once its processes have ended.
inline std::string MakeCgroup(const std::string& controller, const std::string& name,
                              const std::vector<std::pair<std::string, std::string>>& v1,
                              const std::vector<std::pair<std::string, std::string>>& v2) {
  const std::string v1_root = "/sys/fs/cgroup/" + controller;
  const bool is_v1 = fs::is_directory(v1_root) && ::access(v1_root.c_str(), W_OK) == 0;
  if (!is_v1) {
    const std::string controls = testing::ReadFile("/sys/fs/cgroup/cgroup.subtree_control");
    if (controls.find(controller) == std::string::npos || ::access("/sys/fs/cgroup", W_OK) != 0) return "";
  }
  const std::string dir = (is_v1 ? v1_root : std::string("/sys/fs/cgroup")) + "/" + name;
  std::error_code ec;
  fs::create_directory(dir, ec);
  for (const auto& [file, value] : is_v1 ? v1 : v2) {
    std::ofstream out(dir + "/" + file);
    if (!(out << value << "\n" << std::flush)) return "";
  }
  return dir + "/cgroup.procs";
}

// `prep build` of the Fashion-MNIST files into `db` with `options`.
inline testing::CommandResult PrepFashion(const std::string& db, const std::string& options, const TempDir& dir) {
  return RunCommand(kPrep + " build " + kFashion + " " + db + " " + options, dir);
}

// `train ARGS --json`, which must succeed, as JSON; `env`: NAME=value words before it.
inline nlohmann::json TrainJson(const std::string& args, const TempDir& dir, const std::string& env = "") {
  auto r = RunCommand(env + kTrain + " " + args + " --json", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

// The JSON header of the checkpoint file at `path` (docs/FORMAT.md: magic,
// u32 header length, header); null if it is not one.
inline nlohmann::json CheckpointHeaderOf(const std::string& path) {
  const std::string file = testing::ReadFile(path);
  if (file.size() < 12) return nullptr;
  uint32_t length = 0;
  for (int i = 3; i >= 0; --i) length = length << 8 | static_cast<uint8_t>(file[8 + i]);
  return nlohmann::json::parse(file.substr(12, length), nullptr, false);
}

// A fixture with a small db (256 samples of each split) and the start of a
// `train` command on it, for suites of quick refusals.
class SmallDbRun : public EndToEnd {
 protected:
  void SetUp() override {
    EndToEnd::SetUp();
    db_ = dir_.Sub("s.db");
    ASSERT_EQ(PrepFashion(db_, "--limit 256 --no-progress", dir_).exit_code, 0);
    train_ = kTrain + " --db " + db_ + " --batch-size 64 ";
  }
  std::string db_, train_;
};

}  // namespace granary
