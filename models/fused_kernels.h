// What mgpu's fused CUDA kernels (models/kernels/: ConvReluPool, LinearReluChain) share: whether
// they are in use (--fused-kernels) and on which GPUs they run.
#pragma once

#include <torch/torch.h>

namespace mgpu {

// Whether the fused kernels' "Applies" checks may say yes (--fused-kernels; default on).
// Process-wide, as cuDNN's benchmark switch is.
void UseFusedKernels(bool use);
bool FusedKernelsInUse();

// Whether this build has the kernels and `device` runs them: a GPU of compute capability 8.0 or
// newer (built for 8.0, which 8.x GPUs run, and as 9.0 PTX, which newer GPUs compile at load).
bool DeviceRunsFusedKernels(const torch::Device& device);

}  // namespace mgpu
