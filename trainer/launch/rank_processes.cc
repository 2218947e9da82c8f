#include "trainer/launch/rank_processes.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace granary {

RankExec PrepareRank(const LaunchOptions& o, const HeartbeatBoard& board, const RankErrorFiles* errors,
                     int rendezvous_fd, int rank) {
  RankExec e;
  e.args = o.args;
  if (o.kind == RankKind::kTrain) {
    e.args.insert(e.args.end(), {"--rank", std::to_string(o.first_rank + rank)});
    if (rendezvous_fd >= 0) {
      e.args.insert(e.args.end(), {"--rendezvous-file", "/proc/self/fd/" + std::to_string(rendezvous_fd)});
    } else {
      e.args.insert(e.args.end(), {"--port", std::to_string(o.port)});
    }
  }
  // The launcher's variables replace the user's of the same name (a stray
  // GRANARY_HEARTBEAT in the user's environment included).
  std::vector<std::string> own = o.env;
  if (static_cast<size_t>(rank) < o.rank_env.size()) {
    own.insert(own.end(), o.rank_env[rank].begin(), o.rank_env[rank].end());
  }
  own.push_back(board.Environment(rank));
  if (errors != nullptr) own.push_back(errors->Environment(rank));
  for (const std::string& var : o.parent.Entries()) {
    const std::string name = var.substr(0, var.find('=') + 1);
    const bool replaced = std::any_of(own.begin(), own.end(),
                                      [&](const std::string& s) { return s.compare(0, name.size(), name) == 0; });
    if (!replaced) e.env.push_back(var);
  }
  e.env.insert(e.env.end(), own.begin(), own.end());
  for (std::string& a : e.args) e.argv.push_back(a.data());
  e.argv.push_back(nullptr);
  for (std::string& v : e.env) e.envp.push_back(v.data());
  e.envp.push_back(nullptr);
  CPU_ZERO(&e.cpus);
  if (static_cast<size_t>(rank) < o.cpus.size() && !o.cpus[rank].empty()) {
    for (int cpu : o.cpus[rank]) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &e.cpus);
    }
    e.pinned = true;
  }
  return e;
}

std::string ProgramPath(const std::string& program) {
  if (program != "/proc/self/exe") return program;
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : program;
}

void ExecRank(const LaunchOptions& o, RankExec& e, int rank, pid_t launcher, const sigset_t& mask, int out_fd,
              int err_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);  // the launcher died before the prctl
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  if (o.kind == RankKind::kCommand) ::setpgid(0, 0);  // what the rank starts is stopped with it
  if (out_fd >= 0) ::dup2(out_fd, STDOUT_FILENO);
  if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
  if (e.pinned && ::sched_setaffinity(0, sizeof(e.cpus), &e.cpus) != 0) {
    std::fprintf(stderr, "%s: rank %d: cannot pin to its CPUs: %s\n", o.name.c_str(), o.first_rank + rank,
                 std::strerror(errno));
    ::_exit(127);
  }
  const char* program = o.mpirun.empty() ? o.program.c_str() : o.mpirun.c_str();
  ::execve(program, e.argv.data(), e.envp.data());
  if (!o.mpirun.empty()) {
    std::fprintf(stderr, "train: cannot start mpirun (%s): %s; --backend mpi needs OpenMPI's mpirun (openmpi-bin)\n",
                 program, std::strerror(errno));
  } else {
    std::fprintf(stderr, "%s: rank %d: cannot run %s: %s\n", o.name.c_str(), o.first_rank + rank, program,
                 std::strerror(errno));
  }
  ::_exit(127);
}

ProcState ReadProcState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  ProcState p;
  const size_t open = line.find('('), end = line.rfind(") ");  // the name in parentheses may hold anything
  if (open == std::string::npos || end == std::string::npos || end < open || end + 2 >= line.size()) return p;
  p.state = line[end + 2];
  p.name = line.substr(open + 1, end - open - 1);
  // The numbers after the state: ppid (1), ..., utime (11), stime (12), ..., starttime (19).
  long long field[20] = {};
  const char* at = line.c_str() + end + 3;
  for (int k = 1; k < 20 && *at != '\0'; ++k) {
    char* next = nullptr;
    field[k] = std::strtoll(at, &next, 10);
    at = next;
  }
  p.parent = static_cast<pid_t>(field[1]);
  p.cpu_ticks = static_cast<double>(field[11] + field[12]);
  p.start_ticks = static_cast<double>(field[19]);
  return p;
}

std::string RankName(const LaunchOptions& o, int rank) {
  return "rank " + std::to_string(o.first_rank + rank) +
         (o.nnodes > 1 ? " on node " + std::to_string(o.node_rank) : "");
}

bool IsGone(pid_t pid) {
  const char state = pid > 0 ? ReadProcState(pid).state : 0;
  return state == 0 || state == 'Z';
}

bool IsStopped(pid_t pid) {
  const char state = pid > 0 ? ReadProcState(pid).state : 0;
  return state == 'T' || state == 't';
}

std::string FindHungRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, double quiet_s,
                         bool waiting_too, double launched_s) {
  std::string waiting_line;
  for (int r = 0; r < o.ranks; ++r) {
    if (!ranks.Alive(r)) continue;
    RankPulse p = board.Read(r);
    p.quiet_s = ranks.QuietSinceResumed(p.quiet_s);
    const double quiet = p.started ? p.quiet_s : ranks.QuietSinceResumed(launched_s);
    if (quiet < (p.started ? quiet_s : std::max(quiet_s, kStartAllowance_s))) continue;
    const bool stopped = IsStopped(ranks.RankPid(r));
    const std::string name = RankName(o, r);
    const std::string seconds = std::to_string(static_cast<long>(quiet)) + " s";
    if (!p.started) {
      return name + " did not start in " + seconds + (stopped ? " (its process is stopped)" : "") +
             " while its peers waited for it; stopping the run";
    }
    if (p.waiting && !stopped) {
      if (waiting_too && waiting_line.empty()) {
        waiting_line = name + " waited " + seconds + " for the other ranks, past --timeout" +
                       (p.step == 0 && o.nnodes > 1 ? " (before its first step: start all " +
                                                          std::to_string(o.nnodes) +
                                                          " nodes, with the same --master-addr and --master-port)"
                                                    : "") +
                       "; stopping the run";
      }
      continue;
    }
    return name + " made no progress for " + seconds + " (after " + std::to_string(p.step) + " steps" +
           (stopped ? "; its process is stopped" : "") + ") while its peers waited for it; stopping the run";
  }
  return waiting_line;
}

std::string FindQuietCommandRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks,
                                 double quiet_s) {
  struct Quiet {
    int rank;
    RankPulse pulse;
  };
  std::vector<Quiet> quiet;
  for (int r = 0; r < o.ranks; ++r) {
    if (!ranks.Alive(r)) continue;
    RankPulse p = board.Read(r);
    p.quiet_s = ranks.QuietSinceResumed(p.quiet_s);
    const bool stopped = IsStopped(ranks.RankPid(r));
    // A rank quiet inside torch may wait for a peer whose own sign of life
    // (sampled once a second) is not yet as old: it counts a little later.
    const double bound = p.waiting && !stopped ? quiet_s + kWaitingSlack_s : quiet_s;
    // A rank quiet before its first step counts too: at the rendezvous
    // (where torch holds the GIL, so its sign of life stops) a peer it waits
    // for may be gone (the user's srun leaves a task's peers running when
    // one fails); a script that merely starts slowly still moves.
    if (!p.started || p.quiet_s < bound) continue;
    if (stopped) {
      return RankName(o, r) + " made no progress for " + std::to_string(static_cast<long>(p.quiet_s)) +
             " s (after " + std::to_string(p.step) + " steps; its process is stopped); stopping the run";
    }
    quiet.push_back({r, p});
  }
  if (quiet.empty()) return "";
  // Ranks quiet in their own code hold up those quiet inside torch (which
  // may wait for them in a collective), if some are in each.
  const auto in_own_code = [](const Quiet& q) { return !q.pulse.waiting; };
  const size_t own = static_cast<size_t>(std::count_if(quiet.begin(), quiet.end(), in_own_code));
  if (own > 0 && own < quiet.size()) {
    quiet.erase(std::remove_if(quiet.begin(), quiet.end(), [&](const Quiet& q) { return !in_own_code(q); }),
                quiet.end());
  }
  const auto fewest = std::min_element(quiet.begin(), quiet.end(),
                                       [](const Quiet& a, const Quiet& b) { return a.pulse.step < b.pulse.step; });
  const bool alone_behind = std::count_if(quiet.begin(), quiet.end(), [&](const Quiet& q) {
                              return q.pulse.step == fewest->pulse.step;
                            }) == 1;
  const std::string since = " made no progress for " + std::to_string(static_cast<long>(fewest->pulse.quiet_s)) +
                            " s (after " + std::to_string(fewest->pulse.step) + " steps";
  if (alone_behind || quiet.size() == 1) {
    return RankName(o, fewest->rank) + since + (quiet.size() > 1 ? "; its peers are ahead" : "") +
           (own > 0 && !fewest->pulse.waiting && fewest->pulse.step > 0 ? "; not inside torch" : "") +
           (fewest->pulse.step == 0 ? "; before its first step: the rendezvous may wait for a peer that is gone"
                                    : "") +
           "); stopping the run";
  }
  std::string names;
  for (const Quiet& q : quiet) names += (names.empty() ? "" : ", ") + std::to_string(o.first_rank + q.rank);
  return "ranks " + names + (o.nnodes > 1 ? " on node " + std::to_string(o.node_rank) : "") + since +
         "; one may wait for another in a collective); stopping the run";
}

std::string OutOfMemoryCause(const LaunchOptions& o, const OomKills& before) {
  const OomKills now = CountOomKills();
  const std::string advice = o.kind == RankKind::kCommand
                                 ? "fewer ranks, a smaller batch or fewer DataLoader workers need less"
                                 : "fewer --ranks, a smaller --batch-size or --prefetch need less";
  auto size_text = [](uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof(text), bytes < (1ull << 30) ? "%.0f MiB" : "%.1f GiB",
                  static_cast<double>(bytes) / (bytes < (1ull << 30) ? 1 << 20 : 1 << 30));
    return std::string(text);
  };
  if (now.cgroup > before.cgroup) {
    return ": the kernel's out-of-memory killer ended it, the run's processes having outgrown the " +
           size_text(MemoryLimitBytes()) + " their memory cgroup allows (docker run -m, a Slurm job's --mem): " +
           advice;
  }
  if (now.machine > before.machine) {
    const uint64_t kills = now.machine - before.machine;
    return ": the kernel's out-of-memory killer ended " +
           (kills == 1 ? std::string("a process") : std::to_string(kills) + " processes") +
           " on this machine meanwhile, most likely it, the machine's " + size_text(MachineMemoryBytes()) +
           " being full: " + advice;
  }
  return "";
}

}  // namespace granary
