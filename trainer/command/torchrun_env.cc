#include "trainer/command/torchrun_env.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace granary {

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

}  // namespace granary
