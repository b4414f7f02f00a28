// The CUDA kernel of --decode gpu's crop resize (crop_resize_math.h gives the arithmetic and the
// shapes). Plain pointers and a stream, no LibTorch: data/crop_resize.h calls it.
#pragma once

#include <cuda_runtime_api.h>

#include "data/kernels/crop_resize_math.h"

namespace mgpu::kernels {

// Writes the `count` jobs' (on the device) resized crops of `pixels` into `batch`
// (B, 3, side, side) float32 at `layout`'s strides and scaled by it: every value of the positions
// the jobs name, nothing else.
// Asynchronous on `stream`; returns the launch's error.
cudaError_t LaunchCropResize(const CropResizeJob* jobs, int32_t count, const uint8_t* pixels, int32_t side,
                             const BatchLayout& layout, float* batch, cudaStream_t stream);

}  // namespace mgpu::kernels
