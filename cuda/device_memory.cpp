#include "cuda/device_memory.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "common/files.h"

namespace mgpu {

long long DevicePeakMemoryBytes(const torch::Device& device) {
#ifdef MGPU_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  return PeakRssBytes();
}

}  // namespace mgpu
