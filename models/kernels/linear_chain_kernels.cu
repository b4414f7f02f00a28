// Thread blocks over linear_chain_math.h's phases. The per-sample blocks keep a sample's vectors
// (and their gradients) in shared memory and read the weights from global memory (L2 after the
// first block), kChainBlockThreads threads whatever the layer's width.
#include "models/kernels/linear_chain_kernels.h"

namespace mgpu::kernels {
namespace {

constexpr int kParameterBlockThreads = 256;  // a quarter of a parameter tile's elements each

size_t Bytes(int floats) { return sizeof(float) * static_cast<size_t>(floats); }

// Block n: y[n] and hidden[:, n].
__global__ void __launch_bounds__(kChainBlockThreads)
    ChainForwardKernel(LinearChainShape s, const float* __restrict__ x, LinearChainParameters p, float* __restrict__ y,
                       float* __restrict__ hidden) {
  extern __shared__ float vectors[];
  const int n = blockIdx.x;
  LoadFloats(x + int64_t{n} * s.in_features(0), s.in_features(0), vectors, threadIdx.x, blockDim.x);
  MGPU_UNROLL  // constant layer indices: the shape and pointers stay in registers
  for (int l = 0; l < kMaxChainLayers; ++l) {
    if (l >= s.layers) break;
    __syncthreads();
    LayerForward(s, p, l, vectors + s.vector_offset(l), vectors + s.vector_offset(l + 1), threadIdx.x / kWarpSize,
                 blockDim.x / kWarpSize);
  }
  __syncthreads();
  StoreForwardOutputs(s, vectors, n, y, hidden, threadIdx.x, blockDim.x);
}

// Block n: ghidden[:, n] and, unless gx is null, gx[n].
__global__ void __launch_bounds__(kChainBlockThreads)
    ChainInputGradientKernel(LinearChainShape s, LinearChainParameters p, const float* __restrict__ hidden,
                             const float* __restrict__ gy, float* __restrict__ ghidden, float* __restrict__ gx) {
  extern __shared__ float gradients[];
  float* sums = gradients + s.forward_shared_floats();
  const int n = blockIdx.x, last = s.layers - 1;
  LoadFloats(gy + int64_t{n} * s.out_features(last), s.out_features(last), gradients + s.vector_offset(s.layers),
             threadIdx.x, blockDim.x);
  MGPU_UNROLL  // constant layer indices, as in the forward
  for (int l = kMaxChainLayers - 1; l >= 0; --l) {
    if (l > last || (l == 0 && gx == nullptr)) continue;
    __syncthreads();
    SumInputGradientParts(s, p, l, gradients + s.vector_offset(l + 1), sums, threadIdx.x, blockDim.x);
    __syncthreads();
    AddInputGradientParts(s, l, sums, hidden, n, gradients + s.vector_offset(l), l == 0 ? gx : ghidden, threadIdx.x,
                          blockDim.x);
  }
}

// Block b: the tile b - FirstParameterTile(s, l) of the layer l whose tiles hold b. A thread's
// sums are its own elements (e = thread, thread + threads, ...), so only the chunks' buffers need
// the block's barriers.
__global__ void __launch_bounds__(kParameterBlockThreads)
    ChainParameterGradientKernel(LinearChainShape s, const float* __restrict__ x, const float* __restrict__ hidden,
                                 const float* __restrict__ gy, const float* __restrict__ ghidden,
                                 LinearChainGradients g) {
  __shared__ float gout_chunk[kTileSamples * kTileOutputs], in_chunk[kTileSamples * kTileColumns], sums[kTileFloats];
  MGPU_UNROLL  // constant layer indices, as in the forward
  for (int l = 0; l < kMaxChainLayers; ++l) {
    const int tile = static_cast<int>(blockIdx.x) - FirstParameterTile(s, l);
    if (l >= s.layers || tile < 0 || tile >= ParameterTiles(s, l)) continue;
    for (int first = 0; first < s.batch; first += kTileSamples) {
      if (first > 0) __syncthreads();
      LoadParameterTileChunk(s, l, tile, first, x, hidden, gy, ghidden, gout_chunk, in_chunk, threadIdx.x, blockDim.x);
      __syncthreads();
      AccumulateParameterTileChunk(gout_chunk, in_chunk, first == 0, sums, threadIdx.x, blockDim.x);
    }
    StoreParameterTile(s, l, tile, sums, g, threadIdx.x, blockDim.x);
  }
}

}  // namespace

cudaError_t LaunchLinearChainForward(const LinearChainShape& s, const float* x, const LinearChainParameters& p,
                                     float* y, float* hidden, cudaStream_t stream) {
  ChainForwardKernel<<<s.batch, kChainBlockThreads, Bytes(s.forward_shared_floats()), stream>>>(s, x, p, y, hidden);
  return cudaGetLastError();
}

cudaError_t LaunchLinearChainBackward(const LinearChainShape& s, const float* x, const LinearChainParameters& p,
                                      const float* hidden, const float* gy, float* ghidden, float* gx,
                                      const LinearChainGradients& g, cudaStream_t stream) {
  if (s.layers > 1 || gx != nullptr) {
    ChainInputGradientKernel<<<s.batch, kChainBlockThreads, Bytes(s.input_gradient_shared_floats()), stream>>>(
        s, p, hidden, gy, ghidden, gx);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  }
  ChainParameterGradientKernel<<<FirstParameterTile(s, s.layers), kParameterBlockThreads, 0, stream>>>(
      s, x, hidden, gy, ghidden, g);
  return cudaGetLastError();
}

}  // namespace mgpu::kernels
