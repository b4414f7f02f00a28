#include "launcher/net.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

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

}  // namespace

bool IsLoopbackAddress(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
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
  const int port = TryBind(host, 0, error);
  if (port < 0) throw Error(ExitCode::kFailure, fmt::format("cannot find a free TCP port on {}: {}", host, error));
  return port;
}

std::string HostName() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace mgpu
