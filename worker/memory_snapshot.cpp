#include "worker/memory_snapshot.h"

#include <fmt/format.h>

#ifdef MGPU_WITH_CUDA
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

#include "common/files.h"
#include "common/status.h"

namespace mgpu {
namespace {

// Bounds the history's host memory: LeNet's steady state allocates a few dozen blocks a step.
constexpr size_t kMaxEntries = 200000;

}  // namespace

MemorySnapshot::MemorySnapshot(std::string path, const torch::Device& device) : path_(std::move(path)) {
  if (!device.is_cuda()) {
    throw BadInputError(fmt::format("--memory-snapshot {}: records the CUDA caching allocator, but this run "
                                    "trains on {}; use --device cuda on a GPU host, or drop the flag",
                                    path_, device.str()));
  }
#ifdef MGPU_WITH_CUDA  // without it no device is CUDA: the check above has thrown
  torch::cuda::_record_memory_history("all", "all", "python", kMaxEntries);
#endif
}

void MemorySnapshot::Write() {
#ifdef MGPU_WITH_CUDA
  WriteFileAtomically(path_, torch::cuda::_memory_snapshot_pickled());
  torch::cuda::_record_memory_history(std::nullopt);
#endif
}

}  // namespace mgpu
