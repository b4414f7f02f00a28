// What mgpu's CUDA kernels' arithmetic headers (conv_relu_pool_math.h, linear_chain_math.h) share:
// a phase is a function of (thread, threads) that does elements thread, thread + threads, ...; a
// kernel runs it with (threadIdx.x, blockDim.x) and synchronizes its block between phases, the CPU
// tests run the same phase with (0, 1). So CI checks the kernels' arithmetic against ATen on a
// machine without a GPU, and the GPU tests check the kernels against it bit for bit. The headers
// compile as CUDA (nvcc) and as C++ (the tests).
#pragma once

#include <cstdint>

#include "common/host_device.h"

#ifndef __CUDACC__
#include <cmath>
using std::fmaf;
#endif

namespace mgpu::kernels {

// The most shared memory a block may take without opting in: 48 KiB.
constexpr int kMaxSharedFloats = 48 * 1024 / 4;

// The block's elements i = thread, thread + threads, ... < count, kLoadsInFlight at a time: every
// load(i) of a batch before its store(i, value)s, so that a thread's global loads overlap instead
// of each waiting for the store before it (the compiler cannot tell that they do not alias).
constexpr int kLoadsInFlight = 8;
template <typename Load, typename Store>
MGPU_HOST_DEVICE inline void Stage(int count, int thread, int threads, const Load& load, const Store& store) {
  for (int base = thread; base < count; base += kLoadsInFlight * threads) {
    float values[kLoadsInFlight];
    MGPU_UNROLL
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int i = base + u * threads;
      values[u] = i < count ? load(i) : 0.f;
    }
    MGPU_UNROLL
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int i = base + u * threads;
      if (i < count) store(i, values[u]);
    }
  }
}

// dst <- count floats from src.
MGPU_HOST_DEVICE inline void LoadFloats(const float* src, int count, float* dst, int thread, int threads) {
  Stage(count, thread, threads, [&](int i) { return src[i]; }, [&](int i, float value) { dst[i] = value; });
}

// *address, through the read-only data cache on the GPU: for data no thread of the kernel writes.
MGPU_HOST_DEVICE inline float LoadReadOnly(const float* address) {
#ifdef __CUDA_ARCH__
  return __ldg(address);
#else
  return *address;
#endif
}

// ATen's relu: negative values to zero, a NaN stays NaN.
MGPU_HOST_DEVICE inline float Relu(float z) { return z < 0.f ? 0.f : z; }

}  // namespace mgpu::kernels
