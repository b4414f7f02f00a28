#include "ddp/communicator.h"

#include <unistd.h>

#include <string>
#include <utility>

#include <fmt/format.h>

namespace mgpu {

std::unique_ptr<CollectiveWork> Communicator::AllReduceMean(torch::Tensor tensor, const std::string& what) {
  tensor.div_(size());
  return AllReduceSum(std::move(tensor), what);
}

std::string CollectiveContext(const std::string& what, int rank) {
  // Built for every collective (and every graph replay): look the host name up once.
  static const std::string host = [] {
    char name[256] = "unknown-host";
    ::gethostname(name, sizeof(name) - 1);
    return std::string(name);
  }();
  return fmt::format("{} on rank {} (host {})", what, rank, host);
}

}  // namespace mgpu
