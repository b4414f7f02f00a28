// What mgpu's fused CUDA kernels (models/kernels/: ConvReluPool, LinearReluChain, BatchNormAct,
// MaxPool) share: whether they are in use (--fused-kernels), on which GPUs they run, and the
// layout the conv nets' kernels read.
#pragma once

#include <torch/torch.h>

namespace mgpu {

// Whether the fused kernels' "Applies" checks may say yes (--fused-kernels; default on).
// Process-wide, as cuDNN's benchmark switch is.
void UseFusedKernels(bool use);
bool FusedKernelsInUse();

// Whether t is channels-last contiguous with its data 16-byte aligned: what the conv nets' kernels
// (batch norm, max-pool) load in 16-byte vectors.
bool IsAlignedChannelsLast(const torch::Tensor& t);

// t as those kernels read it: t itself where IsAlignedChannelsLast, else a channels-last copy (a
// gradient that autograd hands over in another layout, say). An undefined t stays undefined.
torch::Tensor AlignedChannelsLast(const torch::Tensor& t);

// Whether this build has the kernels and `device` runs them: a GPU of compute capability 8.0 or
// newer (built for 8.0, which 8.x GPUs run, and as 9.0 PTX, which newer GPUs compile at load).
bool DeviceRunsFusedKernels(const torch::Device& device);

}  // namespace mgpu
