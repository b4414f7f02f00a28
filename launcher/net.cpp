#include "launcher/net.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "common/server_ports.h"
#include "common/status.h"

namespace mgpu {
namespace {

// Binds a TCP socket to host:port (SO_REUSEADDR, as servers do); returns the bound port, or -1
// with `error` set.
int TryBind(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    error = fmt::format("the host name cannot be resolved ({})", ::gai_strerror(rc));
    return -1;
  }
  int bound = -1;
  for (addrinfo* a = found; a != nullptr && bound < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
      bound = address.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    } else {
      error = errno == EADDRINUSE ? "the port is already in use" : std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return bound;
}

constexpr int kServerPortTries = 64;

}  // namespace

bool IsLoopbackAddress(const std::string& host) {
  const std::string name = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2)
                                                                                        : host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (name.empty() || ::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback = found != nullptr;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      loopback = loopback && (ip >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      loopback = loopback && (IN6_IS_ADDR_LOOPBACK(&ip) || (IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127));
    } else {
      loopback = false;
    }
  }
  ::freeaddrinfo(found);
  return loopback;
}

void CheckPortFree(const std::string& host, int port, const std::string& flag) {
  std::string error;
  if (TryBind(host, port, error) < 0) {
    throw BadInputError(fmt::format("cannot serve at {}:{} ({} {}): {}; pick another {}, or stop what holds it",
                                    host, port, flag, port, error, flag));
  }
}

int FreeTcpPort(const std::string& host) {
  std::string error;
  for (const int candidate : ServerPortCandidates(EphemeralPorts(), kServerPortTries)) {
    if (TryBind(host, candidate, error) == candidate) return candidate;
  }
  const int port = TryBind(host, 0, error);  // the range below the ephemeral one is full
  if (port < 0) throw Error(ExitCode::kFailure, fmt::format("cannot find a free TCP port on {}: {}", host, error));
  return port;
}

std::string HostName() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace mgpu
