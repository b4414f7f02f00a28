// A thread per gather_math.h item: blocks along a sample's floats (x) and its batch positions (y).
#include "data/kernels/gather_kernels.h"

namespace mgpu::kernels {
namespace {

constexpr int kGatherThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__global__ void __launch_bounds__(kGatherThreads)
    GatherNormalizedKernel(GatherShape s, const uint8_t* __restrict__ source, const int64_t* __restrict__ indices,
                           const float* __restrict__ scale, const float* __restrict__ shift, float* __restrict__ out) {
  const int32_t item = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (item >= s.items_per_sample()) return;
  const int32_t first = item * kGatherFloats;
  // Whole items start 16-byte aligned in every sample where a sample is a whole number of vectors.
  const bool vector_store = s.sample_floats() % kGatherFloats == 0;
  for (int64_t position = blockIdx.y; position < s.batch; position += gridDim.y) {
    const int64_t sample = indices[position];
    if (sample < 0 || sample >= s.samples) __trap();
    const GatherItemValues v = GatherItem(s, first, source + sample * s.sample_floats(), scale, shift);
    float* at = out + position * s.sample_floats() + first;
    if (vector_store) {
      *reinterpret_cast<float4*>(at) = make_float4(v.values[0], v.values[1], v.values[2], v.values[3]);
    } else {
      for (int u = 0; u < v.count; ++u) at[u] = v.values[u];
    }
  }
}

}  // namespace

cudaError_t LaunchGatherNormalized(const GatherShape& s, const uint8_t* source, const int64_t* indices,
                                   const float* scale, const float* shift, float* out, cudaStream_t stream) {
  if (s.batch == 0) return cudaSuccess;
  const dim3 blocks((s.items_per_sample() + kGatherThreads - 1) / kGatherThreads,
                    static_cast<unsigned>(s.batch < kMaxGridY ? s.batch : kMaxGridY));
  GatherNormalizedKernel<<<blocks, kGatherThreads, 0, stream>>>(s, source, indices, scale, shift, out);
  return cudaGetLastError();
}

}  // namespace mgpu::kernels
