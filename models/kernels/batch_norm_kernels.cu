// Thread blocks over batch_norm_math.h's phases: the reductions and the element-wise passes on a
// grid of s.tiles() x s.splits blocks of kBnBlockThreads, the finalizes a warp per channel. The
// apply and gradient kernels have an instance per set of tensors they read (a residual; gy2, y),
// the others null constants in it: each holds only its own loads in registers and keeps as many
// rows in flight as kBnVectorsInFlight (batch_norm_math.h) allows.
#include "models/kernels/batch_norm_kernels.h"

namespace mgpu::kernels {
namespace {

constexpr int kFinalizeThreads = 256;  // 8 channels a block
// Two blocks of the tile kernels per SM: 16 warps, each with its rows' loads in flight.
constexpr int kBnBlocksPerSm = 2;

dim3 TileGrid(const BatchNormShape& s) { return dim3(s.splits, s.tiles()); }
int FinalizeBlocks(const BatchNormShape& s) {
  constexpr int kChannelsPerBlock = kFinalizeThreads / kSumLanes;
  return (s.channels + kChannelsPerBlock - 1) / kChannelsPerBlock;
}
// The warp's channel in a finalize block.
__device__ int FinalizeChannelOfThisWarp() { return (blockIdx.x * blockDim.x + threadIdx.x) / kSumLanes; }

template <typename T>
__global__ void __launch_bounds__(kBnBlockThreads, kBnBlocksPerSm)
    StatisticsKernel(BatchNormShape s, const T* __restrict__ x, float* __restrict__ partials) {
  __shared__ float lane_sums[2 * kBnRowLanes * kBnTileChannels];
  constexpr int kRows = BnRowsInFlight<T>(1);
  StatisticsLaneSums<kRows>(s, x, blockIdx.x, blockIdx.y, lane_sums, threadIdx.x, blockDim.x);
  __syncthreads();
  StoreSplitPartials(s, blockIdx.x, blockIdx.y, lane_sums, partials, threadIdx.x, blockDim.x);
}

template <typename T>
__global__ void __launch_bounds__(kFinalizeThreads)
    FinalizeKernel(BatchNormShape s, const T* __restrict__ x, const float* __restrict__ partials,
                   BatchNormParameters p, BatchNormStatistics st) {
  const int c = FinalizeChannelOfThisWarp();
  if (c >= s.channels) return;  // the whole warp
  float sums[2];
  SplitSums(s, partials, c, sums);
  if (threadIdx.x % kSumLanes == 0) FinalizeChannel(s, p, c, ToFloat(x[c]), sums, st);
}

template <typename T, bool kResidual>
__global__ void __launch_bounds__(kBnBlockThreads, kBnBlocksPerSm)
    ApplyKernel(BatchNormShape s, const T* __restrict__ x, const T* __restrict__ residual, BatchNormStatistics st,
                bool relu, T* __restrict__ y) {
  constexpr int kRows = BnRowsInFlight<T>(1 + kResidual);
  Apply<kRows>(s, x, kResidual ? residual : nullptr, st, relu, blockIdx.x, blockIdx.y, y, threadIdx.x, blockDim.x);
}

// The gradient kernels' instance for gy2's and y's presence: the source with the others null
// constants, and the rows in flight that x, gy and those allow.
template <typename T, bool kTwoGradients, bool kReadsY>
struct GradientInstance {
  static constexpr int kRows = BnRowsInFlight<T>(2 + kTwoGradients + kReadsY);
  __device__ static GradientSource<T> Source(const GradientSource<T>& source) {
    return {source.gy, kTwoGradients ? source.gy2 : nullptr, kReadsY ? source.y : nullptr};
  }
};

template <typename T, bool kTwoGradients, bool kReadsY>
__global__ void __launch_bounds__(kBnBlockThreads, kBnBlocksPerSm)
    GradientSumsKernel(BatchNormShape s, const T* __restrict__ x, GradientSource<T> source, BatchNormStatistics st,
                       bool relu, float* __restrict__ partials, T* __restrict__ gresidual) {
  __shared__ float lane_sums[2 * kBnRowLanes * kBnTileChannels];
  using Instance = GradientInstance<T, kTwoGradients, kReadsY>;
  GradientLaneSums<Instance::kRows>(s, x, Instance::Source(source), st, relu, blockIdx.x, blockIdx.y, lane_sums,
                                    gresidual, threadIdx.x, blockDim.x);
  __syncthreads();
  StoreSplitPartials(s, blockIdx.x, blockIdx.y, lane_sums, partials, threadIdx.x, blockDim.x);
}

__global__ void __launch_bounds__(kFinalizeThreads)
    GradientFinalizeKernel(BatchNormShape s, const float* __restrict__ partials, const float* __restrict__ gamma,
                           const float* __restrict__ invstd, BatchNormGradients g) {
  const int c = FinalizeChannelOfThisWarp();
  if (c >= s.channels) return;
  float sums[2];
  SplitSums(s, partials, c, sums);
  if (threadIdx.x % kSumLanes == 0) FinalizeGradientChannel(s, gamma, invstd, c, sums, g);
}

template <typename T, bool kTwoGradients, bool kReadsY>
__global__ void __launch_bounds__(kBnBlockThreads, kBnBlocksPerSm)
    GradientApplyKernel(BatchNormShape s, const T* __restrict__ x, GradientSource<T> source, BatchNormStatistics st,
                        BatchNormGradients g, bool relu, T* __restrict__ gx) {
  using Instance = GradientInstance<T, kTwoGradients, kReadsY>;
  GradientApply<Instance::kRows>(s, x, Instance::Source(source), st, g, relu, blockIdx.x, blockIdx.y, gx, threadIdx.x,
                                 blockDim.x);
}

// The backward's three passes, the gradient kernels' instance for gy2's and y's presence. Where bn
// had a residual, the sums pass stored g as its gradient: the apply pass reads it back as its gy,
// with no relu (the instance that reads neither gy2 nor y).
template <typename T, bool kTwoGradients, bool kReadsY>
cudaError_t LaunchGradientPasses(const BatchNormShape& s, const T* x, const GradientSource<T>& source,
                                 const float* gamma, const BatchNormStatistics& st, bool relu, float* partials,
                                 const BatchNormGradients& g, T* gx, T* gresidual, cudaStream_t stream) {
  GradientSumsKernel<T, kTwoGradients, kReadsY>
      <<<TileGrid(s), kBnBlockThreads, 0, stream>>>(s, x, source, st, relu, partials, gresidual);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  GradientFinalizeKernel<<<FinalizeBlocks(s), kFinalizeThreads, 0, stream>>>(s, partials, gamma, st.invstd, g);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  if (gresidual != nullptr) {
    const GradientSource<T> passed{gresidual, nullptr, nullptr};
    GradientApplyKernel<T, false, false>
        <<<TileGrid(s), kBnBlockThreads, 0, stream>>>(s, x, passed, st, g, /*relu=*/false, gx);
  } else {
    GradientApplyKernel<T, kTwoGradients, kReadsY>
        <<<TileGrid(s), kBnBlockThreads, 0, stream>>>(s, x, source, st, g, relu, gx);
  }
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchBatchNormForward(const BatchNormShape& s, const T* x, const T* residual, const BatchNormParameters& p,
                                   bool relu, float* partials, const BatchNormStatistics& st, T* y,
                                   cudaStream_t stream) {
  StatisticsKernel<<<TileGrid(s), kBnBlockThreads, 0, stream>>>(s, x, partials);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  FinalizeKernel<<<FinalizeBlocks(s), kFinalizeThreads, 0, stream>>>(s, x, partials, p, st);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  if (residual != nullptr) {
    ApplyKernel<T, true><<<TileGrid(s), kBnBlockThreads, 0, stream>>>(s, x, residual, st, relu, y);
  } else {
    ApplyKernel<T, false><<<TileGrid(s), kBnBlockThreads, 0, stream>>>(s, x, nullptr, st, relu, y);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBatchNormBackward(const BatchNormShape& s, const T* x, const T* y, const T* gy, const T* gy2,
                                    const float* gamma, const BatchNormStatistics& st, bool relu, float* partials,
                                    float* coefficients, float* ggamma, float* gbeta, T* gx, T* gresidual,
                                    cudaStream_t stream) {
  const BatchNormGradients g{ggamma, gbeta, coefficients, coefficients + s.channels, coefficients + 2 * s.channels};
  const GradientSource<T> source{gy, gy2, y};
  if (gy2 != nullptr && y != nullptr) {
    return LaunchGradientPasses<T, true, true>(s, x, source, gamma, st, relu, partials, g, gx, gresidual, stream);
  }
  if (gy2 != nullptr) {
    return LaunchGradientPasses<T, true, false>(s, x, source, gamma, st, relu, partials, g, gx, gresidual, stream);
  }
  if (y != nullptr) {
    return LaunchGradientPasses<T, false, true>(s, x, source, gamma, st, relu, partials, g, gx, gresidual, stream);
  }
  return LaunchGradientPasses<T, false, false>(s, x, source, gamma, st, relu, partials, g, gx, gresidual, stream);
}

#define MGPU_BATCH_NORM_INSTANCES(T)                                                                                \
  template cudaError_t LaunchBatchNormForward<T>(const BatchNormShape&, const T*, const T*,                         \
                                                 const BatchNormParameters&, bool, float*, const BatchNormStatistics&, \
                                                 T*, cudaStream_t);                                                  \
  template cudaError_t LaunchBatchNormBackward<T>(const BatchNormShape&, const T*, const T*, const T*, const T*,      \
                                                  const float*, const BatchNormStatistics&, bool, float*, float*,    \
                                                  float*, float*, T*, T*, cudaStream_t);
MGPU_BATCH_NORM_INSTANCES(Bf16)
MGPU_BATCH_NORM_INSTANCES(float)
#undef MGPU_BATCH_NORM_INSTANCES

}  // namespace mgpu::kernels
