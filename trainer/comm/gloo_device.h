// Which address a rank's Gloo pairs listen on, and so advertise to the other
// ranks. PyTorch's rule is GLOO_SOCKET_IFNAME, else the address this
// machine's hostname resolves to; on Debian that is 127.0.1.1 (/etc/hosts),
// which no other node can reach, so a run across machines failed on node 1
// with "connect [127.0.0.1]: Connection refused". Here a loopback answer is
// replaced by the address this machine uses to reach the master.
#pragma once

#include <string>

#include "base/status.h"

namespace granary {

struct GlooDevice {
  std::string iface;    // listen on this interface's address, or
  std::string address;  // on this address ("" neither: Gloo's default, the hostname's address)
  std::string why;      // how it was chosen, for messages
};

// `iface` (--iface) first, then `env_iface` (GLOO_SOCKET_IFNAME, its first
// name if a comma list), then: the loopback address when the master is on
// it (or there is no master: one machine); the hostname's address when that
// is not loopback; else the local address of the route to `master`.
// InvalidArgument naming --iface and GLOO_SOCKET_IFNAME when none can reach
// another machine.
StatusOr<GlooDevice> ChooseGlooDevice(const std::string& master, const std::string& iface,
                                      const std::string& env_iface);

// Whether `host` is or resolves only to loopback addresses (127.0.0.0/8, ::1).
bool IsLoopbackHost(const std::string& host);

}  // namespace granary
