// Which network interface a rank's Gloo device uses, decided the way PyTorch users expect:
//   GLOO_SOCKET_IFNAME=eth0[,eth1]  those interfaces (one Gloo device each), as in PyTorch;
//   a loopback master address      127.0.0.1 (every rank is on this host);
//   otherwise                      the local address of the route to the master address, so a
//                                  host whose name resolves to 127.0.1.1 (Debian's default) or
//                                  to an address of another network still reaches its peers.
#pragma once

#include <string>
#include <vector>

#include "ddp/world.h"

namespace mgpu {

struct GlooInterface {
  std::vector<std::string> interface_names;  // from GLOO_SOCKET_IFNAME; when set, used alone
  std::string bind_address;                  // otherwise: the address the device binds to
  std::string Describe() const;              // for the rendezvous log line
};

// `master_host`: the rendezvous store's host. Throws BadInputError for an empty interface name
// in GLOO_SOCKET_IFNAME.
GlooInterface ChooseGlooInterface(const std::string& master_host, const EnvLookup& env);

// The source address this host uses to reach `host` (a UDP "connect" sends nothing), or "" when
// the name does not resolve or no route leads there.
std::string LocalAddressTowards(const std::string& host);

}  // namespace mgpu
