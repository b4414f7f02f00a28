// ConvReluPool: max_pool2d(relu(conv2d(x, weight, bias, padding)), 2) as one differentiable step
// in mgpu's own CUDA kernels (models/kernels/): the forward in one kernel, which keeps for each
// pooled output which conv output it took; the backward in three (the filters' gradient terms per
// sample, their sum over the batch, the input's gradient; two where x needs no gradient). For a
// small network at a small batch, ATen's kernels (cuDNN's convolutions, the bias, ReLU and pooling,
// each with its gradient) are mostly launch and tail time: LeNet's two stages at batch 32 take 23
// of them per training step, these 7, and its graphed step on an H100 runs 7,467-7,711 steps/s
// against 4,909-5,433 with ATen's (bench/results/2026-11-27-1xH100-lenet-fused-kernels/).
//
// The kernels compute in float32 with FMAs in a fixed order, so a run gives the same bits every
// time (TF32 does not apply: cuDNN's TF32 convolutions round their inputs to 10 mantissa bits).
// Where they do not apply (FusedConvReluPoolApplies), callers run the ATen operations.
#pragma once

#include <torch/torch.h>

namespace mgpu {

// Whether ConvReluPool runs `conv` on x: fused kernels in use (models/fused_kernels.h), x float32
// and contiguous NCHW on a GPU that runs them, autocast off, `conv` a float32 square-kernel
// convolution on x's device with a bias and x's channels, stride 1, dilation 1, one group, zero
// padding of at most R - 1, at least one pooled output, and its blocks' buffers within 48 KiB of
// shared memory (kernels::FitsTheKernels).
bool FusedConvReluPoolApplies(const torch::Tensor& x, const torch::nn::Conv2dImpl& conv);

// x (N, C, H, W) -> (N, K, (H + 2P - R + 1) / 2, (W + 2P - R + 1) / 2). Differentiable in x,
// weight (K, C, R, R) and bias (K). Only where FusedConvReluPoolApplies.
torch::Tensor ConvReluPool(const torch::Tensor& x, const torch::nn::Conv2dImpl& conv);

}  // namespace mgpu
