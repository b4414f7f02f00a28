#include "models/fused_kernels.h"

#include <atomic>
#include <cstdint>

#ifdef MGPU_HAS_FUSED_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif

namespace mgpu {
namespace {

std::atomic<bool> fused_kernels_in_use{true};

constexpr uintptr_t kVectorAlignment = 16;

}  // namespace

void UseFusedKernels(bool use) { fused_kernels_in_use = use; }

bool FusedKernelsInUse() { return fused_kernels_in_use; }

bool IsAlignedChannelsLast(const torch::Tensor& t) {
  return t.is_contiguous(torch::MemoryFormat::ChannelsLast) &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % kVectorAlignment == 0;
}

torch::Tensor AlignedChannelsLast(const torch::Tensor& t) {
  if (!t.defined() || IsAlignedChannelsLast(t)) return t;
  torch::Tensor rows = t.contiguous(torch::MemoryFormat::ChannelsLast);
  return IsAlignedChannelsLast(rows) ? rows : rows.clone(torch::MemoryFormat::ChannelsLast);
}

bool DeviceRunsFusedKernels(const torch::Device& device) {
#ifdef MGPU_HAS_FUSED_KERNELS
  return device.is_cuda() && at::cuda::getDeviceProperties(device.index())->major >= 8;
#else
  (void)device;
  return false;
#endif
}

}  // namespace mgpu
