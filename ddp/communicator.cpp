#include "ddp/communicator.h"

#include <unistd.h>

#include <utility>

#include <fmt/format.h>

namespace mgpu {

std::unique_ptr<CollectiveWork> Communicator::AllReduceMean(torch::Tensor tensor, const std::string& what) {
  tensor.div_(size());
  return AllReduceSum(std::move(tensor), what);
}

std::string CollectiveContext(const std::string& what, int rank) {
  char host[256] = "unknown-host";
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("{} on rank {} (host {})", what, rank, host);
}

}  // namespace mgpu
