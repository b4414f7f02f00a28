// y = act(bn(x) [+ residual]): a BatchNorm2d in training mode, an optional residual added to its
// output, then relu or nothing, in mgpu's own CUDA kernels where they apply (models/kernels/
// batch_norm_*: two passes over x forward, two over x and gy backward, and y where a residual was
// added; the add and relu inside them) and as ATen's batch_norm, add and relu otherwise. The conv
// nets' blocks call it for every batch norm: the ATen sequence reads and writes the activation
// three more times forward and backward, and at bf16 on an H100 those passes, not the
// convolutions, were most of a ResNet's step.
//
// The kernels apply to x on a GPU that runs mgpu's fused kernels (models/fused_kernels.h; off
// with --fused-kernels false) in training mode, bfloat16 or float32, channels-last contiguous
// (N, C, H, W) with C a multiple of 8 and more than one value per channel, 16-byte aligned; bn
// affine, with a momentum, its parameters and running statistics float32 (num_batches_tracked
// int64) on x's device; the residual, if any, x's shape, type and layout. Their arithmetic is
// float32, the output rounded once (batch_norm_math.h), the same bits every run; the running
// statistics are updated as ATen does (unbiased variance, momentum) and num_batches_tracked counts
// the step (in the kernels: ATen's add of its own would be one more kernel per batch norm).
#pragma once

#include <torch/torch.h>

#include "models/forked_activation.h"

namespace mgpu {

enum class Activation { kNone, kRelu };

// Whether mgpu's kernels compute BatchNormAct(x, bn, residual, ...). residual may be undefined.
bool FusedBatchNormApplies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn,
                           const torch::Tensor& residual);

// act(bn(x) + residual) (no residual where it is undefined): the kernels where
// FusedBatchNormApplies, else bn's forward, ATen's add and relu. Gradients reach x, bn's weight and
// bias and the residual.
torch::Tensor BatchNormAct(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& residual,
                           Activation act);

// BatchNormAct's y for two consumers.
ForkedActivation BatchNormActForked(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn,
                                    const torch::Tensor& residual, Activation act);

// act(bn(conv(x))) for a conv with a bias (VGG's). Where the kernels apply to the conv's output,
// the conv runs without its bias and the batch norm folds it in: the normalization subtracts it
// with the mean, so only the running mean sees it, and its gradient is exactly zero (the kernels
// return zeros) instead of ATen's sum of rounding residues. No bias add, no gradient sum. Else
// conv's forward and BatchNormAct.
torch::Tensor ConvBatchNormAct(const torch::Tensor& x, torch::nn::Conv2dImpl& conv, torch::nn::BatchNorm2dImpl& bn,
                               Activation act);

}  // namespace mgpu
