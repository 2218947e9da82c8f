#include "trainer/tune_run.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/json_text.h"
#include "loader/loader.h"
#include "trainer/comm/comm.h"
#include "trainer/launch/launch.h"
#include "trainer/launch/held_cpus.h"
#include "trainer/launch/layout.h"
#include "trainer/features/features.h"
#include "trainer/models/precision.h"
#include "trainer/tune/tune.h"

namespace granary {
namespace {

// A memfd holding what a probe's ranks print.
class Capture {
 public:
  Capture() : fd_(::memfd_create("granary-probe", MFD_CLOEXEC)) {}
  ~Capture() {
    if (fd_ >= 0) ::close(fd_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  int fd() const { return fd_; }
  std::string Text() const {
    std::string text;
    char buffer[1 << 16];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd_, buffer, sizeof(buffer), at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return text;
      text.append(buffer, static_cast<size_t>(n));
      at += n;
    }
  }

 private:
  int fd_;
};

// One --tune probe: the ranks of `config` (started by this process, as a
// run's launcher starts them), each with `args` and `env`; what rank 0 printed.
StatusOr<ProbeOutput> RunProbe(const TrainConfig& config, const std::vector<std::string>& args,
                               const Environment& env) {
  Capture out, err;
  if (out.fd() < 0 || err.fd() < 0) return Status::IOError("memfd", "capture a probe's output", errno);
  const Layout layout = PlanLayoutFreeFirst(config, UsableCpus());  // placed as the run it measures would be
  LaunchOptions launch = RankLaunchOptions(config, layout, args, MpirunPath(), env);
  launch.stdout_fd = out.fd();
  launch.stderr_fd = err.fd();
  GRANARY_ASSIGN_OR_RETURN(LaunchOutcome outcome, LaunchRanks(launch));
  if (outcome.stopped_by != 0) {
    return Status::FailedPrecondition(std::string("stopped by ") + ::strsignal(outcome.stopped_by));
  }
  ProbeOutput p;
  p.exit_code = outcome.exit_code;
  p.out = out.Text();
  p.err = outcome.failure.empty() ? err.Text() : outcome.failure;
  return p;
}

}  // namespace

int RunTune(const TrainConfig& config, const Workload& workload, const TuneRequest& request, bool backend_asked,
            bool json, const Environment& env) {
  TuneOptions options;
  options.cores = UsableCpuCount();
  if (Status bounded = CheckTuneSeconds(request.seconds); !bounded.ok()) return PrintFailure("train", bounded);
  TrainConfig probing = config;  // what every probe runs with, less its layout
  probing.data.probe_s = request.seconds;
  if (Status valid = ValidateRun(probing, options.cores); !valid.ok()) return PrintFailure("train", valid);
  if (config.dist.nnodes > 1) {
    return PrintFailure("train", Status::InvalidArgument("--tune runs on one node (not with --nnodes)"));
  }
  options.numerics = request.numerics;
  options.image_input = workload.kind == InputKind::kImage;
  options.bf16_native = CpuHasNativeBf16();
  options.seconds = request.seconds;
  options.mpi = !backend_asked && CommHasMpi() && ::access(MpirunPath().c_str(), X_OK) == 0;
  // A candidate names its backend: the user's "--backend auto" would be a second one.
  const std::vector<std::string> run_args =
      options.mpi ? WithoutOptions(request.args, {"--backend"}, {}) : request.args;
  // Probes leave nothing behind: no checkpoint, model, metrics or report.
  const std::vector<std::string> probe_args =
      WithoutOptions(run_args,
                     {"--save", "--metrics", "--report", "--log-every", "--checkpoint-dir", "--checkpoint-every",
                      "--keep", "--resume"},
                     {"--json"});
  options.run_probe = [&](const TrainConfig& probe, const TuneCandidate& candidate) {
    std::vector<std::string> args = ArgsFor(probe_args, candidate);
    args.insert(args.end(), {"--tune-probe", std::to_string(probe.data.probe_s), "--json"});
    return RunProbe(probe, args, env);
  };
  std::fprintf(stderr, "train: --tune: measuring layouts on %d cores, about %g s each\n", options.cores,
               request.seconds);
  StatusOr<TuneTable> table = RunTune(config, options);
  if (!table.ok()) return PrintFailure("train", table.status());
  const TuneCandidate& chosen = table->Chosen()->candidate;
  std::fprintf(stderr, "%strain: tuned in %.1f s: %s\n", table->ToText().c_str(), table->seconds,
               chosen.Describe().c_str());
  if (request.only) {
    if (json) std::printf("%s\n", DumpJson(nlohmann::json{{"tune", ParseJson(table->ToJson())}}).c_str());
    return 0;
  }
  std::vector<std::string> args = ArgsFor(run_args, chosen);
  args.insert(args.end(), {"--tune-table", table->ToJson()});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv.data());
  return PrintFailure("train", Status::IOError("/proc/self/exe", "run the tuned layout", errno));
}


}  // namespace granary
