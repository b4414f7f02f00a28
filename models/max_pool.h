// y = max_pool2d(x) for a MaxPool2d module, in mgpu's own CUDA kernels where they apply
// (models/kernels/max_pool_*: a pass over x forward that keeps a byte per output element for where
// its max was, a pass over gy backward) and as the module's forward (ATen's) otherwise. ResNet's
// ImageNet stem, VGG and AlexNet call it for their pools.
//
// The kernels apply to x on a GPU that runs mgpu's fused kernels (models/fused_kernels.h; off with
// --fused-kernels false): bfloat16 or float32, channels-last contiguous (N, C, H, W) with C a
// multiple of 8, 16-byte aligned; a window of at most 256 elements without dilation or ceil mode.
// Their output and gradient are ATen's bit for bit (max_pool_math.h says where a window of -inf
// points).
#pragma once

#include <torch/torch.h>

#include "models/forked_activation.h"

namespace mgpu {

// Whether mgpu's kernels compute MaxPool(x, pool).
bool FusedMaxPoolApplies(const torch::Tensor& x, const torch::nn::MaxPool2dImpl& pool);

// pool's max_pool2d of x: the kernels where FusedMaxPoolApplies, else pool.forward(x). Gradients
// reach x.
torch::Tensor MaxPool(const torch::Tensor& x, torch::nn::MaxPool2dImpl& pool);

// MaxPool's y for two consumers (models/forked_activation.h).
ForkedActivation MaxPoolForked(const torch::Tensor& x, torch::nn::MaxPool2dImpl& pool);

}  // namespace mgpu
