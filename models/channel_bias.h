// AddChannelBias: a convolution's bias added as its own step, y = x + bias.view(1, C, 1, 1), for
// a (N, C, H, W) activation, with a bias gradient summed in two contiguous reductions (over H·W,
// then over N) where the gradient is contiguous NCHW. ATen's convolution backward sums the bias
// gradient in one strided reduction over N, H and W, which is slow for small activations: for
// LeNet at batch 32 on an H100, 8.8 µs (conv1, (32, 6, 28, 28)) and 15.3 µs (conv2, (32, 16, 10,
// 10)) against 6.2 and 6.0 µs in two stages, and PyTorch's graphed LeNet step 6.5% faster with
// it (bench/results/2026-11-26-2xH100-decode-fix-fused-sgd/, lenet_alt.py); mgpu's graphed LeNet step
// 3.3% (bench/results/2026-11-26-2xH100-vgg-host-bound-lenet-bias/).
//
// The result has x's dtype (under autocast a bf16 or fp16 activation gets the bias cast to it, as
// cuDNN's convolution with bias does); the bias gradient has the bias's dtype and is accumulated
// in float32. Any other layout (channels-last) sums as ATen does.
#pragma once

#include <torch/torch.h>

namespace mgpu {

// x: (N, C, H, W); bias: (C). Differentiable in both.
torch::Tensor AddChannelBias(const torch::Tensor& x, const torch::Tensor& bias);

}  // namespace mgpu
