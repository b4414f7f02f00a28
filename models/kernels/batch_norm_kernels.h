// CUDA kernels of the fused training-mode batch norm y = act(bn(x) [+ residual]) over a
// channels-last activation (batch_norm_math.h gives the shapes and the arithmetic). Plain pointers
// and a stream, no LibTorch: models/batch_norm_act.h is the autograd function around them.
//
// T is Bf16 or float. Shapes are MakeBatchNormShape's of a shape FitsTheBatchNormKernels; every
// tensor pointer is 16-byte aligned. `partials` is s.partial_floats() of scratch. Every launch is
// asynchronous on `stream` (CUDA-graph capturable: no allocation, no host sync) and returns the
// launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include "models/kernels/batch_norm_math.h"

namespace mgpu::kernels {

// residual may be null; st receives the batch's statistics (the backward's mean and invstd among
// them), p's running statistics are updated.
template <typename T>
cudaError_t LaunchBatchNormForward(const BatchNormShape& s, const T* x, const T* residual, const BatchNormParameters& p,
                                   bool relu, float* partials, const BatchNormStatistics& st, T* y,
                                   cudaStream_t stream);

// From gy (plus gy2 unless null: a second consumer's gradient of y) and the forward's x, y and
// statistics: gx, the parameters' gradients and, unless gresidual is null, the residual's
// gradient. y is read where relu had a residual and may be null otherwise (recomputed from x).
// `coefficients` is 3 C floats of scratch.
template <typename T>
cudaError_t LaunchBatchNormBackward(const BatchNormShape& s, const T* x, const T* y, const T* gy, const T* gy2,
                                    const float* gamma, const BatchNormStatistics& st, bool relu, float* partials,
                                    float* coefficients, float* ggamma, float* gbeta, T* gx, T* gresidual,
                                    cudaStream_t stream);

}  // namespace mgpu::kernels
