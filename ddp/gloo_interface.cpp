#include "ddp/gloo_interface.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string ThisHostName() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

std::string GlooInterface::Describe() const {
  if (interface_names.empty()) return "gloo bound to " + bind_address;
  std::string names;
  for (const auto& name : interface_names) names += (names.empty() ? "" : ",") + name;
  return "gloo on GLOO_SOCKET_IFNAME=" + names;
}

std::string LocalAddressTowards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return "";
  std::string address;
  for (addrinfo* candidate = found; candidate != nullptr && address.empty(); candidate = candidate->ai_next) {
    const int fd = ::socket(candidate->ai_family, candidate->ai_socktype, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) address = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return address;
}

GlooInterface ChooseGlooInterface(const std::string& master_host, const EnvLookup& env) {
  GlooInterface choice;
  if (const char* names = env("GLOO_SOCKET_IFNAME"); names != nullptr && names[0] != '\0') {
    const std::string list = names;
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string name = list.substr(start, comma - start);
      if (name.empty()) {
        throw BadInputError(fmt::format("GLOO_SOCKET_IFNAME='{}' has an empty interface name; give names such as "
                                        "eth0 or eth0,eth1 (`ip -br link` lists them)",
                                        list));
      }
      choice.interface_names.push_back(name);
      start = comma + 1;
    }
    return choice;
  }
  if (IsLoopbackHost(master_host)) {
    choice.bind_address = "127.0.0.1";
    return choice;
  }
  choice.bind_address = LocalAddressTowards(master_host);
  // No route (or the master is this host under a name that resolves to loopback): gloo's own
  // choice, this host's name, is what PyTorch would use too.
  if (choice.bind_address.empty() || IsLoopbackHost(choice.bind_address)) choice.bind_address = ThisHostName();
  return choice;
}

}  // namespace mgpu
