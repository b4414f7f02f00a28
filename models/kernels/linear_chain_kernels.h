// CUDA kernels of the fused fully connected head y = L_{M-1}(relu(... relu(L_0(x)) ...))
// (linear_chain_math.h gives the shapes and the arithmetic). Plain pointers and a stream, no
// LibTorch: models/linear_relu_chain.h is the autograd function around them.
//
// Shapes FitsTheKernels. Every launch is asynchronous on `stream` (CUDA-graph capturable: no
// allocation, no host sync) and returns the launch's error (cudaSuccess, or e.g.
// cudaErrorNoKernelImageForDevice on a GPU this build has no code for).
#pragma once

#include <cuda_runtime_api.h>

#include "models/kernels/linear_chain_math.h"

namespace mgpu::kernels {

// y (N, F_M) and hidden (N * s.hidden_features() floats, as the backward reads them) from x (N, F_0).
cudaError_t LaunchLinearChainForward(const LinearChainShape& s, const float* x, const LinearChainParameters& p,
                                     float* y, float* hidden, cudaStream_t stream);

// From gy (the gradient of y) and the forward's x and hidden: every parameter's gradient (g), via
// ghidden (N * s.hidden_features() floats of scratch), and gx (N, F_0) unless gx is null.
cudaError_t LaunchLinearChainBackward(const LinearChainShape& s, const float* x, const LinearChainParameters& p,
                                      const float* hidden, const float* gy, float* ghidden, float* gx,
                                      const LinearChainGradients& g, cudaStream_t stream);

}  // namespace mgpu::kernels
