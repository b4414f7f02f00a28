// A thread per max_pool_math.h item: an output pixel's vector of channels forward, an input
// pixel's backward, so a warp reads whole rows of channels.
#include "models/kernels/max_pool_kernels.h"

namespace mgpu::kernels {
namespace {

constexpr int kPoolThreads = 256;

unsigned BlocksFor(int64_t items) { return static_cast<unsigned>((items + kPoolThreads - 1) / kPoolThreads); }

__device__ int64_t ThisThreadsItem() { return int64_t{blockIdx.x} * blockDim.x + threadIdx.x; }

template <typename T>
__global__ void __launch_bounds__(kPoolThreads)
    MaxPoolForwardKernel(MaxPoolShape s, const T* __restrict__ x, T* __restrict__ y,
                         uint8_t* __restrict__ window_index) {
  const int64_t item = ThisThreadsItem();
  if (item < s.forward_items()) MaxPoolForwardItem(s, item, x, y, window_index);
}

template <typename T>
__global__ void __launch_bounds__(kPoolThreads)
    MaxPoolBackwardKernel(MaxPoolShape s, const T* __restrict__ gy, const T* __restrict__ gy2,
                          const uint8_t* __restrict__ window_index, T* __restrict__ gx) {
  const int64_t item = ThisThreadsItem();
  if (item < s.backward_items()) MaxPoolBackwardItem(s, item, gy, gy2, window_index, gx);
}

}  // namespace

template <typename T>
cudaError_t LaunchMaxPoolForward(const MaxPoolShape& s, const T* x, T* y, uint8_t* window_index, cudaStream_t stream) {
  MaxPoolForwardKernel<<<BlocksFor(s.forward_items()), kPoolThreads, 0, stream>>>(s, x, y, window_index);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchMaxPoolBackward(const MaxPoolShape& s, const T* gy, const T* gy2, const uint8_t* window_index, T* gx,
                                  cudaStream_t stream) {
  MaxPoolBackwardKernel<<<BlocksFor(s.backward_items()), kPoolThreads, 0, stream>>>(s, gy, gy2, window_index, gx);
  return cudaGetLastError();
}

#define MGPU_MAX_POOL_INSTANCES(T)                                                                      \
  template cudaError_t LaunchMaxPoolForward<T>(const MaxPoolShape&, const T*, T*, uint8_t*, cudaStream_t); \
  template cudaError_t LaunchMaxPoolBackward<T>(const MaxPoolShape&, const T*, const T*, const uint8_t*, T*, cudaStream_t);
MGPU_MAX_POOL_INSTANCES(Bf16)
MGPU_MAX_POOL_INSTANCES(float)
#undef MGPU_MAX_POOL_INSTANCES

}  // namespace mgpu::kernels
