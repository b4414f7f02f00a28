// Thread blocks over conv_relu_pool_math.h's phases, with the block's buffers in shared memory.
// Every block has kBlockThreads threads whatever its phases' work: at LeNet's sizes the blocks are
// latency-bound (a phase's global loads, then its chains of FMAs), and more threads keep more loads
// in flight. The filter size is a template argument where it is 5 (LeNet's), so the filter loops
// unroll; any other size reads it from the shape.
#include "models/kernels/conv_relu_pool_kernels.h"

namespace mgpu::kernels {
namespace {

size_t Bytes(int floats) { return sizeof(float) * static_cast<size_t>(floats); }

// Block (n * K + k): y[n, k] and window[n, k].
template <int kKernel>
__global__ void ForwardKernel(ConvReluPoolShape s, const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ b, float* __restrict__ y, uint8_t* __restrict__ window) {
  extern __shared__ float shared[];
  float* xpad = shared;
  float* filter = xpad + s.xpad_floats();
  float* conv = filter + s.filter_floats();
  const int n = blockIdx.x / s.out_channels, k = blockIdx.x % s.out_channels;
  LoadPaddedInput(s, x, n, xpad, threadIdx.x, blockDim.x);
  LoadFloats(w + int64_t{k} * s.filter_floats(), s.filter_floats(), filter, threadIdx.x, blockDim.x);
  __syncthreads();
  ConvolveCovered<kKernel>(s, xpad, filter, conv, threadIdx.x, blockDim.x);
  __syncthreads();
  PoolRelu(s, conv, b[k], n, k, y, window, threadIdx.x, blockDim.x);
}

// Block (n * K + k): partial[n, k] (filter k's gradient terms for sample n) and, unless padded is
// null, padded[n, k] (the gradient of its conv outputs, as the input gradient reads it).
template <int kKernel>
__global__ void WeightGradientKernel(ConvReluPoolShape s, const float* __restrict__ x, const float* __restrict__ gy,
                                     const float* __restrict__ y, const uint8_t* __restrict__ window,
                                     float* __restrict__ partial, float* __restrict__ padded) {
  extern __shared__ float shared[];
  float* xpad = shared;
  float* gconv = xpad + s.xpad_floats();
  float* sums = gconv + s.covered();
  const int n = blockIdx.x / s.out_channels, k = blockIdx.x % s.out_channels;
  LoadPaddedInput(s, x, n, xpad, threadIdx.x, blockDim.x);
  GatherConvGradient(s, gy, y, window, n, k, gconv, threadIdx.x, blockDim.x);
  __syncthreads();
  if (padded != nullptr) WritePaddedConvGradient(s, gconv, n, k, padded, threadIdx.x, blockDim.x);
  SumTermsByGroup<kKernel>(s, xpad, gconv, sums, threadIdx.x, blockDim.x);
  __syncthreads();
  AddGroups(s, sums, n, k, partial, threadIdx.x, blockDim.x);
}

__global__ void SumOverBatchKernel(ConvReluPoolShape s, const float* __restrict__ partial, float* __restrict__ gw,
                                   float* __restrict__ gb) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int terms = s.terms();
  if (i >= s.out_channels * terms) return;
  const int k = i / terms, j = i % terms;
  const float sum = SumOverBatchAt(s, partial, k, j);
  if (j == terms - 1) {
    gb[k] = sum;
  } else {
    gw[k * (terms - 1) + j] = sum;
  }
}

// Block (n * C + c): gx[n, c].
template <int kKernel>
__global__ void InputGradientKernel(ConvReluPoolShape s, const float* __restrict__ padded, const float* __restrict__ w,
                                    float* __restrict__ gx) {
  extern __shared__ float shared[];
  float* gpad = shared;
  float* filters = gpad + s.gpad_floats();
  const int n = blockIdx.x / s.in_channels, c = blockIdx.x % s.in_channels;
  LoadFloats(padded + int64_t{n} * s.gpad_floats(), s.gpad_floats(), gpad, threadIdx.x, blockDim.x);
  LoadChannelFilters(s, w, c, filters, threadIdx.x, blockDim.x);
  __syncthreads();
  InputGradient<kKernel>(s, gpad, filters, n, c, gx, threadIdx.x, blockDim.x);
}

template <int kKernel>
cudaError_t Forward(const ConvReluPoolShape& s, const float* x, const float* w, const float* b, float* y,
                    uint8_t* window, cudaStream_t stream) {
  ForwardKernel<kKernel><<<s.batch * s.out_channels, kBlockThreads, Bytes(s.forward_shared_floats()),
                           stream>>>(s, x, w, b, y, window);
  return cudaGetLastError();
}

template <int kKernel>
cudaError_t Backward(const ConvReluPoolShape& s, const float* x, const float* w, const float* y,
                     const uint8_t* window, const float* gy, float* gx, float* partial, float* padded, float* gw,
                     float* gb, cudaStream_t stream) {
  WeightGradientKernel<kKernel><<<s.batch * s.out_channels, kBlockThreads,
                                  Bytes(s.weight_gradient_shared_floats()), stream>>>(
      s, x, gy, y, window, partial, gx == nullptr ? nullptr : padded);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  const int sums = s.out_channels * s.terms();
  SumOverBatchKernel<<<(sums + kBlockThreads - 1) / kBlockThreads, kBlockThreads, 0, stream>>>(s, partial, gw, gb);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess || gx == nullptr) return error;
  InputGradientKernel<kKernel><<<s.batch * s.in_channels, kBlockThreads,
                                 Bytes(s.input_gradient_shared_floats()), stream>>>(s, padded, w, gx);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchConvReluPoolForward(const ConvReluPoolShape& s, const float* x, const float* w, const float* b,
                                      float* y, uint8_t* window, cudaStream_t stream) {
  return s.kernel == 5 ? Forward<5>(s, x, w, b, y, window, stream) : Forward<0>(s, x, w, b, y, window, stream);
}

cudaError_t LaunchConvReluPoolBackward(const ConvReluPoolShape& s, const float* x, const float* w, const float* y,
                                       const uint8_t* window, const float* gy, float* gx, float* partial,
                                       float* padded, float* gw, float* gb, cudaStream_t stream) {
  return s.kernel == 5 ? Backward<5>(s, x, w, y, window, gy, gx, partial, padded, gw, gb, stream)
                       : Backward<0>(s, x, w, y, window, gy, gx, partial, padded, gw, gb, stream);
}

}  // namespace mgpu::kernels
