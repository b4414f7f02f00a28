// LinearReluChain: a network's fully connected head, layers[M-1](relu(... relu(layers[0](x)) ...)),
// as one differentiable step in mgpu's own CUDA kernels (models/kernels/linear_chain_*): the
// forward in one kernel (a block per sample, its vectors in shared memory), the backward in two
// (the inputs' gradients, a block per sample, back through the layers; every parameter's gradient,
// a thread each). At a small batch ATen's path is mostly launches and tails: LeNet's head at batch
// 32 takes a GEMM per layer forward, two per layer backward with cuBLAS's split-K reductions, a sum
// per bias gradient and relu's kernels, 19 kernels and ~51 us of a graphed training step on an H100;
// these take 3 and ~23 us, and the step runs 9,302-9,386 steps/s against 7,467-7,711 with the
// convolution stages alone fused (bench/results/2026-11-27-1xH100-lenet-fused-head/).
//
// The kernels compute in float32 with FMAs in a fixed order, so a run gives the same bits every
// time (TF32 does not apply). Where they do not apply (FusedLinearReluChainApplies), callers run
// the ATen operations.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace mgpu {

// Whether LinearReluChain runs `layers` on x: fused kernels in use (models/fused_kernels.h), x a
// contiguous float32 (N, F_0) batch on a GPU that runs them, autocast off, 1 to 4 float32 layers
// with biases on x's device, each taking the previous one's features (the first, x's), and a
// sample's vectors within 48 KiB of shared memory (kernels::FitsTheKernels).
bool FusedLinearReluChainApplies(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers);

// x (N, F_0) -> (N, F_M). Differentiable in x and every layer's weight and bias. Only where
// FusedLinearReluChainApplies.
torch::Tensor LinearReluChain(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers);

}  // namespace mgpu
