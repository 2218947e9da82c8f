// launch: train's launcher for any command, most often a user's own PyTorch
// script: torchrun's environment for each rank, threads and pinning by
// train's layout, failures named, restarts, and --tune measuring the
// layout on the command itself. This file only turns flags into a
// CommandConfig; trainer/command/command.h runs it.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/file.h"
#include "trainer/command/command.h"
#include "trainer/command/torchrun_env.h"

int main(int argc, char** argv) {
  granary::CommandConfig c;
  CLI::App app{"Runs COMMAND as the ranks of a data-parallel job, as torchrun does, with granary's CPU recipe "
               "(see README.md, \"Your own PyTorch script\").\n\n  launch [flags] [--] COMMAND [ARGS...]"};
  app.prefix_command();  // the first word that is no flag of launch's starts COMMAND
  // torchrun's spellings of the same flags are taken too (--nproc-per-node, --node_rank, ...).
  std::string ranks;
  app.add_option("--ranks,--nproc-per-node,--nproc_per_node", ranks,
                 "rank processes on this node (default 1; with --tune: measured); torchrun's auto: the default, "
                 "cpu: one rank per CPU");
  app.add_option("--threads", c.threads, "intra-op threads per rank (0: the CPUs / ranks)")->capture_default_str();
  app.add_option("--loader-threads", c.loader_threads,
                 "granary.Loader workers per rank (GRANARY_LOADER_THREADS), on the rank's CPUs")
      ->capture_default_str();
  app.add_option("--pin", c.pin, "pin each rank to its own CPUs (on or off)")->capture_default_str();
  app.add_flag("--oversubscribe", c.oversubscribe, "allow ranks x threads above this machine's CPUs");
  std::string allocator = granary::NameOf(c.allocator), prefix = granary::NameOf(c.prefix);
  app.add_option("--allocator", allocator,
                 "auto (glibc, unless --tune measured another faster), glibc, jemalloc or tcmalloc (LD_PRELOAD)")
      ->capture_default_str();
  app.add_option("--nnodes", c.nnodes, "nodes of the job, each running --ranks ranks")->capture_default_str();
  app.add_option("--node-rank,--node_rank", c.node_rank, "this node's index, 0 .. --nnodes - 1")->capture_default_str();
  app.add_option("--master-addr,--master_addr", c.master_addr, "node 0's address, where rank 0 serves the rendezvous");
  app.add_option("--master-port,--master_port", c.master_port, "the rendezvous port (one node: a free one is chosen)");
  app.add_option("--iface", c.iface, "network interface for Gloo (GLOO_SOCKET_IFNAME)");
  app.add_option("--timeout", c.timeout_s,
                 "seconds without a training step after which a rank is hung and the job stopped (0: never)")
      ->capture_default_str();
  app.add_option("--grace", c.grace_s, "seconds between SIGTERM and SIGKILL when the ranks are stopped")
      ->capture_default_str();
  app.add_option("--max-restarts,--max_restarts", c.max_restarts,
                 "start the whole job again after a failure, up to N times")
      ->capture_default_str();
  app.add_option("--prefix", prefix, "rank names before output lines: auto (all but rank 0), all or none")
      ->capture_default_str();
  app.add_flag("--tune", c.tune, "measure layouts and allocators on COMMAND itself, then run with the fastest");
  app.add_flag("--tune-only", c.tune_only, "measure and print the table; do not run the job");
  app.add_option("--tune-seconds", c.tune_seconds, "--tune: measured seconds of training per candidate")
      ->capture_default_str();
  app.add_flag("--json", c.json, "one JSON object (layout, tune table, attempts, exit code) as stdout's last line");
  app.add_option("-m,--module", c.module, "run python3 -u -m MODULE [ARGS...] as each rank, as torchrun -m does");
  app.add_flag("--no-python,--no_python", c.no_python,
               "run COMMAND as it is (by default a COMMAND ending in .py is run by python3 -u, as under torchrun)");
  bool standalone = false;
  app.add_flag("--standalone", standalone, "torchrun's: one node, its rendezvous on a free port (launch's default)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "launch: %s (see launch --help)\n", e.what());
    return 2;
  }
  const auto refuse = [](const char* flag, const std::string& value, const std::string& names) {
    std::fprintf(stderr, "launch: %s %s: expected %s\n", flag, value.c_str(), names.c_str());
    return 2;
  };
  if (!granary::ParseChoice(allocator, &c.allocator)) {
    return refuse("--allocator", allocator, granary::ChoiceNames(c.allocator));
  }
  if (!granary::ParseChoice(prefix, &c.prefix)) return refuse("--prefix", prefix, granary::ChoiceNames(c.prefix));
  c.command = app.remaining();
  // A word starting with '-' where COMMAND should start is a flag launch does not have (after -m MODULE, the
  // module's own arguments start there).
  if (c.module.empty() && !c.command.empty() && c.command[0] != "--" && c.command[0].size() > 1 &&
      c.command[0][0] == '-') {
    const std::string advice = granary::TorchrunFlagAdvice(c.command[0]);
    std::fprintf(stderr, "launch: %s: %s\n", c.command[0].c_str(),
                 advice.empty() ? "no such flag (see launch --help; a COMMAND starting with '-' follows --)"
                                : advice.c_str());
    return 2;
  }
  if (!c.command.empty() && c.command[0] == "--") c.command.erase(c.command.begin());
  if (standalone && c.nnodes > 1) {
    std::fprintf(stderr, "launch: --standalone is one node; --nnodes %d needs --master-addr and --master-port\n",
                 c.nnodes);
    return 2;
  }
  if (!ranks.empty()) {
    if (granary::Status parsed = granary::ParseRanksFlag(ranks, &c.ranks, &c.ranks_given); !parsed.ok()) {
      std::fprintf(stderr, "launch: %s\n", parsed.message().c_str());
      return 2;
    }
  }
  const int code = granary::RunCommand(c, granary::Environment::OfProcess());
  if (granary::Status flushed = granary::FlushStdout(); code == 0 && !flushed.ok()) {
    std::fprintf(stderr, "launch: %s\n", flushed.message().c_str());
    return 1;
  }
  return code;
}
