// CUDA kernels of the fused convolution stage y = max_pool2d(relu(conv2d(x, w, padding) + b), 2)
// (conv_relu_pool_math.h gives the shapes and the arithmetic). Plain pointers and a stream, no
// LibTorch: models/conv_relu_pool.h is the autograd function around them.
//
// Shapes have at least one pooled output and FitsTheKernels. Every launch is asynchronous on
// `stream` (CUDA-graph capturable: no allocation, no host sync) and returns the launch's error
// (cudaSuccess, or e.g. cudaErrorNoKernelImageForDevice on a GPU this build has no code for: it
// has compute capability 8.0 and newer).
#pragma once

#include <cuda_runtime_api.h>

#include "models/kernels/conv_relu_pool_math.h"

namespace mgpu::kernels {

// y, window: (N, K, PH, PW).
cudaError_t LaunchConvReluPoolForward(const ConvReluPoolShape& s, const float* x, const float* w, const float* b,
                                      float* y, uint8_t* window, cudaStream_t stream);

// From gy (the gradient of y) and the forward's x, w, y and window: gw (K, C, R, R) and gb (K), via
// `partial` (N * K * s.terms() floats of scratch, summed over N in sample order), and gx (N, C, H, W)
// via `padded` (N * s.gpad_floats() floats of scratch) unless gx is null.
cudaError_t LaunchConvReluPoolBackward(const ConvReluPoolShape& s, const float* x, const float* w, const float* y,
                                       const uint8_t* window, const float* gy, float* gx, float* partial,
                                       float* padded, float* gw, float* gb, cudaStream_t stream);

}  // namespace mgpu::kernels
