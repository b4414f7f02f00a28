#include "ddp/communicator.h"

#include <unistd.h>

#include <fmt/format.h>

namespace mgpu {

std::string CollectiveContext(const std::string& what, int rank) {
  char host[256] = "unknown-host";
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("{} on rank {} (host {})", what, rank, host);
}

}  // namespace mgpu
