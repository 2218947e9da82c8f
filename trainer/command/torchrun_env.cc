#include "trainer/command/torchrun_env.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "trainer/launch/layout.h"

namespace granary {

std::vector<std::string> TorchrunCommand(const std::vector<std::string>& command, const std::string& module,
                                         bool no_python) {
  std::vector<std::string> out;
  if (!module.empty()) {
    out = {"python3", "-u", "-m", module};
  } else if (!no_python && !command.empty() && command[0].size() > 3 &&
             command[0].compare(command[0].size() - 3, 3, ".py") == 0) {
    out = {"python3", "-u"};
  }
  out.insert(out.end(), command.begin(), command.end());
  return out;
}

std::string TorchrunFlagAdvice(const std::string& flag) {
  // The flag's name, '_' read as '-' and without "=value", as torchrun reads it.
  std::string name = flag.substr(0, flag.find('='));
  for (char& c : name) c = c == '_' ? '-' : c;
  const std::string rendezvous =
      "launch's rendezvous is torch's TCPStore served by rank 0: give --master-addr and --master-port (the same on "
      "every node) with --nnodes and --node-rank";
  const std::pair<const char*, std::string> advice[] = {
      {"--rdzv-endpoint", rendezvous},
      {"--rdzv-backend", rendezvous},
      {"--rdzv-id", rendezvous},
      {"--rdzv-conf", rendezvous},
      {"--local-addr", rendezvous},
      {"--tee", "launch relays every rank's output, rank 0's plain and the others' after \"[rank R] \" (--prefix "
                "auto|all|none)"},
      {"-t", "launch relays every rank's output, rank 0's plain and the others' after \"[rank R] \" (--prefix "
             "auto|all|none)"},
      {"--redirects", "launch relays every rank's output to its own (--prefix auto|all|none); redirect that"},
      {"-r", "launch relays every rank's output to its own (--prefix auto|all|none); redirect that"},
      {"--log-dir", "launch relays every rank's output to its own (--prefix auto|all|none); redirect that"},
      {"--monitor-interval", "launch watches its ranks continuously; --timeout names a rank without a step"},
      {"--start-method", "launch starts each rank as a process of its own (fork and exec)"},
      {"--role", "launch's ranks have one role, \"default\" (ROLE_NAME)"},
      {"--run-path", "give the script as COMMAND: a .py is run by python3, as torchrun runs it"},
  };
  for (const auto& [known, text] : advice) {
    if (name == known) return "torchrun's " + name + " is not launch's: " + text;
  }
  return "";
}

std::vector<std::string> TorchrunVariables(const CommandJob& job, int i) {
  const std::string rank = std::to_string(job.first_rank + i);
  const std::string world = std::to_string(job.world);
  return {
      "RANK=" + rank,
      "LOCAL_RANK=" + std::to_string(job.first_local + i),
      "GROUP_RANK=" + std::to_string(job.node_rank),
      "ROLE_RANK=" + rank,
      "ROLE_NAME=default",
      "LOCAL_WORLD_SIZE=" + std::to_string(job.local_world),
      "WORLD_SIZE=" + world,
      "GROUP_WORLD_SIZE=" + std::to_string(job.nnodes),
      "ROLE_WORLD_SIZE=" + world,
      "MASTER_ADDR=" + job.master_addr,
      "MASTER_PORT=" + std::to_string(job.master_port),
      "TORCHELASTIC_RESTART_COUNT=" + std::to_string(job.restart),
      "TORCHELASTIC_MAX_RESTARTS=" + std::to_string(job.max_restarts),
      "TORCHELASTIC_RUN_ID=" + job.run_id,
      // Rank 0 serves the rendezvous (TCPStore) at MASTER_ADDR:MASTER_PORT,
      // as under torchrun's static rendezvous: there is no agent store.
      "TORCHELASTIC_USE_AGENT_STORE=False",
  };
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

Status ParseRanksFlag(const std::string& text, int* ranks, bool* given) {
  if (text == "auto") {
    *given = false;
    return Status::OK();
  }
  if (text == "cpu") {
    *ranks = std::max<int>(1, static_cast<int>(UsableCpus().size()));
    *given = true;
    return Status::OK();
  }
  const bool digits = !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) {
    return Status::InvalidArgument("--ranks (--nproc-per-node) " + text + ": expected a number of ranks, auto " +
                                   "(launch's default; --tune measures) or cpu (one rank per CPU)" +
                                   (text == "gpu" || text == "xpu" ? "; launch runs CPU ranks" : ""));
  }
  *ranks = std::stoi(text);
  *given = true;
  return Status::OK();
}

}  // namespace granary
