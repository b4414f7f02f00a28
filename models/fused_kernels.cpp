#include "models/fused_kernels.h"

#include <atomic>

#ifdef MGPU_HAS_FUSED_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif

namespace mgpu {
namespace {

std::atomic<bool> fused_kernels_in_use{true};

}  // namespace

void UseFusedKernels(bool use) { fused_kernels_in_use = use; }

bool FusedKernelsInUse() { return fused_kernels_in_use; }

bool DeviceRunsFusedKernels(const torch::Device& device) {
#ifdef MGPU_HAS_FUSED_KERNELS
  return device.is_cuda() && at::cuda::getDeviceProperties(device.index())->major >= 8;
#else
  (void)device;
  return false;
#endif
}

}  // namespace mgpu
