// The CUDA kernel of --data-on-device's batch gather (gather_math.h gives the shapes and the
// arithmetic). Plain pointers and a stream, no LibTorch: data/device_resident_batches.h calls it.
#pragma once

#include <cuda_runtime_api.h>

#include "data/kernels/gather_math.h"

namespace mgpu::kernels {

// out = the normalized samples at `indices` (on the device) of `source`, in s's layout; the shape
// GatherFits, and `out` is 16-byte aligned.
// Asynchronous on `stream` (CUDA-graph capturable); returns the launch's error. An index outside
// [0, s.samples) stops the kernel with a device-side trap, as ATen's index_select asserts:
// the batch would otherwise be read from outside the set.
cudaError_t LaunchGatherNormalized(const GatherShape& s, const uint8_t* source, const int64_t* indices,
                                   const float* scale, const float* shift, float* out, cudaStream_t stream);

}  // namespace mgpu::kernels
