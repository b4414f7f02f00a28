// Small TCP helpers for `mgpu run`: which addresses are loopback, whether a port is free, a free
// port, this host's name.
#pragma once

#include <string>

namespace mgpu {

// Whether `host` resolves (getaddrinfo) only to loopback addresses: 127.0.0.0/8, ::1 and
// IPv4-mapped 127.x. A name that does not resolve, or resolves to any other address as well, is
// not loopback (a name is judged by what it resolves to, never by how it is spelt).
bool IsLoopbackAddress(const std::string& host);

// Throws BadInputError naming `host:port` and `flag` when the port cannot be bound there (taken,
// or an address not of this machine), so a job fails before it starts any worker.
void CheckPortFree(const std::string& host, int port, const std::string& flag);

// A port that was free on `host` a moment ago, below the ephemeral range where one can be bound
// (common/server_ports.h). Throws mgpu::Error if none can be bound.
int FreeTcpPort(const std::string& host);

std::string HostName();

}  // namespace mgpu
