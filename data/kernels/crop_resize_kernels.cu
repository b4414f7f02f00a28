// A thread per output pixel of a crop (its three channels): blocks along the pixels (x) and the
// chunk's jobs (y).
#include "data/kernels/crop_resize_kernels.h"

namespace mgpu::kernels {
namespace {

constexpr int kResizeThreads = 256;
constexpr int32_t kMaxGridY = 65535;

__global__ void __launch_bounds__(kResizeThreads)
    CropResizeKernel(const CropResizeJob* __restrict__ jobs, int32_t count, const uint8_t* __restrict__ pixels,
                     int32_t side, BatchLayout layout, float* __restrict__ batch) {
  const int32_t pixel = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (pixel >= side * side) return;
  const int32_t y = pixel / side, x = pixel % side;
  for (int32_t k = blockIdx.y; k < count; k += gridDim.y) {
    const CropResizeJob job = jobs[k];
    float values[3];
    ResizedPixel(job, pixels, side, y, x, values);
    for (int c = 0; c < 3; ++c) batch[BatchIndex(job, layout, side, c, y, x)] = StoredValue(layout, c, values[c]);
  }
}

}  // namespace

cudaError_t LaunchCropResize(const CropResizeJob* jobs, int32_t count, const uint8_t* pixels, int32_t side,
                             const BatchLayout& layout, float* batch, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const dim3 blocks((side * side + kResizeThreads - 1) / kResizeThreads, count < kMaxGridY ? count : kMaxGridY);
  CropResizeKernel<<<blocks, kResizeThreads, 0, stream>>>(jobs, count, pixels, side, layout, batch);
  return cudaGetLastError();
}

}  // namespace mgpu::kernels
