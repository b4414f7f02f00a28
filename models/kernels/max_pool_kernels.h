// CUDA kernels of mgpu's max-pool over a channels-last activation (max_pool_math.h gives the shapes
// and the arithmetic). Plain pointers and a stream, no LibTorch: models/max_pool.h is the autograd
// function around them.
//
// T is Bf16 or float; the shape FitsTheMaxPoolKernels; x, y, gy and gx are 16-byte aligned, the
// window indices (s.forward_items() kVector bytes) 8-byte aligned. Every launch is asynchronous on
// `stream` (CUDA-graph capturable) and returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include "models/kernels/max_pool_math.h"

namespace mgpu::kernels {

// y = max_pool2d(x) and where in its window each max was.
template <typename T>
cudaError_t LaunchMaxPoolForward(const MaxPoolShape& s, const T* x, T* y, uint8_t* window_index, cudaStream_t stream);

// gx from gy (plus gy2, a second consumer's gradient, where not null) and the forward's window
// indices.
template <typename T>
cudaError_t LaunchMaxPoolBackward(const MaxPoolShape& s, const T* gy, const T* gy2, const uint8_t* window_index, T* gx,
                                  cudaStream_t stream);

}  // namespace mgpu::kernels
