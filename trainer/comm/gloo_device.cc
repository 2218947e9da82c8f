#include "trainer/comm/gloo_device.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace granary {
namespace {

bool IsLoopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

std::string AddressText(const sockaddr* a) {
  char text[INET6_ADDRSTRLEN] = "";
  const void* raw = a->sa_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr)
                        : &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
  ::inet_ntop(a->sa_family, raw, text, sizeof(text));
  return text;
}

// Each address `host` resolves to (empty if it does not).
std::vector<sockaddr_storage> Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::vector<sockaddr_storage> out;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    sockaddr_storage s{};
    std::memcpy(&s, a->ai_addr, a->ai_addrlen);
    out.push_back(s);
  }
  ::freeaddrinfo(found);
  return out;
}

// The local address the kernel would send from to reach `to` (a UDP
// socket's connect sends nothing); "" if there is no route.
std::string SourceAddressFor(const sockaddr_storage& to) {
  const int fd = ::socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_storage peer = to;
  if (peer.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&peer)->sin_port = htons(9);
  if (peer.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&peer)->sin6_port = htons(9);
  const socklen_t peer_size = peer.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  sockaddr_storage self{};
  socklen_t self_size = sizeof(self);
  std::string out;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&peer), peer_size) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_size) == 0 &&
      !IsLoopback(reinterpret_cast<const sockaddr*>(&self))) {
    out = AddressText(reinterpret_cast<const sockaddr*>(&self));
  }
  ::close(fd);
  return out;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  const std::vector<sockaddr_storage> addresses = Resolve(host);
  if (addresses.empty()) return host == "localhost";
  for (const sockaddr_storage& a : addresses) {
    if (!IsLoopback(reinterpret_cast<const sockaddr*>(&a))) return false;
  }
  return true;
}

StatusOr<GlooDevice> ChooseGlooDevice(const std::string& master, const std::string& iface,
                                      const std::string& env_iface) {
  if (!iface.empty()) return GlooDevice{iface, "", "--iface " + iface};
  if (!env_iface.empty()) {
    const std::string first = env_iface.substr(0, env_iface.find(','));
    return GlooDevice{first, "", "GLOO_SOCKET_IFNAME=" + env_iface};
  }
  if (master.empty() || IsLoopbackHost(master)) return GlooDevice{"", "127.0.0.1", "the loopback address"};
  char name[256] = "";
  ::gethostname(name, sizeof(name) - 1);
  for (const sockaddr_storage& a : Resolve(name)) {
    if (!IsLoopback(reinterpret_cast<const sockaddr*>(&a))) return GlooDevice{"", "", "hostname " + std::string(name)};
  }
  for (const sockaddr_storage& m : Resolve(master)) {
    const std::string source = SourceAddressFor(m);
    if (!source.empty()) {
      return GlooDevice{"", source, "the address that routes to --master-addr " + master};
    }
  }
  return Status::InvalidArgument("this machine's hostname " + std::string(name) +
                                 " resolves to a loopback address, which the other nodes cannot reach, and no route "
                                 "to --master-addr " + master +
                                 " was found: set --iface (or GLOO_SOCKET_IFNAME) to the interface the nodes share");
}

}  // namespace granary
