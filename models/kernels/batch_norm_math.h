// The arithmetic of mgpu's fused training-mode batch norm, y = act(bn(x) [+ residual]) with act
// relu or none, over a channels-last activation, as the phases of its CUDA kernels' thread blocks
// (batch_norm_kernels.cu; block_phases.h says what a phase is), which the CPU tests run block by
// block (tests/support/batch_norm_on_host.h).
//
// Shapes: x, residual, y and their gradients are (M, C) row-major: a channels-last (N, C, H, W)
// tensor with M = N H W rows of C channels, in bfloat16 (Bf16) or float32, C a multiple of
// kBnVector, 16-byte aligned. Per channel, float32: gamma, beta, running mean and variance, and
// what the forward saves for the backward (mean, invstd).
//
// Semantics are ATen's batch_norm in training mode (biased variance to normalize, unbiased for
// the running variance, running = running + momentum (batch - running)) followed by ATen's add and
// relu (NaN passes; relu's backward zeroes the gradient where y <= 0), computed in float32 and
// rounded once to the element type (ATen rounds bn's output, then the sum, to bfloat16).
//
// A reduction over the rows (the forward's statistics, the backward's two sums) splits them into
// s.splits ranges of s.rows_per_split; a block takes one range of one tile of kBnTileChannels
// channels. Lane l (of kBnRowLanes) of a tile sums rows begin + l, begin + l + kBnRowLanes, ...
// in order; the lanes' sums are added in lane order (the split's partial), the splits' partials in
// split order (lane j of a warp sums splits j, j + 32, ..., then the 32 lanes' sums pairwise,
// offsets 16, 8, 4, 2, 1). No atomics and a split that depends on the shape alone: the same bits
// every run, on any GPU. The forward's statistics are sums of d = x - x[0, c] (shifted by the first
// row, so that a mean far from zero does not cancel the variance's digits).
//
// Kernels (the reductions' grid: s.tiles() x s.splits blocks of kBnBlockThreads; the element-wise
// ones use the same grid, a thread keeping its channels' coefficients in registers):
//   statistics      partials[2][splits][C]: sum d, sum d^2 per split
//   finalize        mean, invstd, scale, shift, running stats (and the batch count); a warp per channel
//   apply           y = act(x * scale + shift [+ residual])
//   grad sums       partials[2][splits][C]: sum g, sum g (x - mean), g = gy where act passes;
//                   and g itself as the residual's gradient, where there is a residual
//   grad finalize   gamma's and beta's gradients, gx's coefficients; a warp per channel
//   grad apply      gx = a g + b (x - mean) + c, g read back from the residual's gradient where
//                   there is one (as gy with no relu: one tensor instead of gy, gy2 and y)
// A y that two consumers read (a ResNet block's output) may come with two gradients, gy and gy2:
// the backward adds them as it loads them, rounded to the element type as ATen's add rounds
// them, instead of reading a sum that another pass wrote.
// Where relu follows bn with no residual, the backward recomputes y from x (the forward's float32
// arithmetic and rounding, so the same bits) instead of reading it: one tensor fewer in each pass.
// A bias the input lacks (`input_bias`: a convolution's, folded into the batch norm, which
// subtracts the mean and so cancels it) only moves the running mean; its gradient, a sum of gx
// over the rows, is exactly zero.
#pragma once

#include "models/kernels/block_phases.h"
#include "models/kernels/vector_elements.h"

namespace mgpu::kernels {

constexpr int kBnVector = kVector;                              // channels a thread loads at once
constexpr int kBnTileChannels = 64;                             // channels of a block's tile
constexpr int kBnVectorsPerRow = kBnTileChannels / kBnVector;   // 8
constexpr int kBnRowLanes = 32;                                 // a tile's interleaved row sums
constexpr int kBnBlockThreads = kBnRowLanes * kBnVectorsPerRow;  // 256: one (lane, vector) each
// Blocks a kernel aims for: one wave of an H100 (132 SMs, two 256-thread blocks each, every thread
// with its rows' loads in flight). Fewer splits than four waves' 1,056 leave the
// finalizes fewer partials to add, and no last wave part-empty: ResNet-18's graphed step (bf16, 32 px,
// batch 256) went from 58,736 to 63,246 img/s on an H100 (VGG-19 +1.7%, ResNet-50 +2.1%). A shape
// constant, so that the splits and the sums' order never depend on the GPU.
constexpr int kBnTargetBlocks = 264;
constexpr int kBnMinRowsPerSplit = 4 * kBnRowLanes;
// Loads a thread keeps in flight, in 16-byte vectors of bfloat16: each pass issues the loads of its
// lane's next rows, every tensor it reads, before it uses any (in order), as many rows as these
// vectors hold (the statistics 8 rows, the gradient passes 2 to 4). At 16 warps an SM a pass moves
// bytes at about the rate its loads in flight allow, up to the registers' limit (128 a thread at
// two blocks an SM); float's vectors take twice the registers: half the rows. 8 measured best of 8
// to 24 on an H200 (bench/results/2026-11-29-1xH200-bn-bandwidth), with no kernel spilling. At 16
// the gradient kernels spilled and the gradient apply wrote a wrong gx in each lane's first rows,
// where the same source built without spills (one block an SM) gave the right bits: the GPU tests
// (tests/gpu/batch_norm_cuda_test.cpp) compare every instance with the CPU's bits, run them after
// changing this.
constexpr int kBnVectorsInFlight = 8;

// The rows a pass of T keeps in flight: kBnVectorsInFlight over the vectors a row loads, at least one.
template <typename T>
MGPU_HOST_DEVICE constexpr int BnRowsInFlight(int vectors_per_row) {
  const int rows = kBnVectorsInFlight / vectors_per_row / (sizeof(T) == 2 ? 1 : 2);
  return rows > 1 ? rows : 1;
}

struct BatchNormShape {
  int64_t rows = 0;  // M
  int channels = 0;  // C
  int splits = 0;
  int64_t rows_per_split = 0;

  MGPU_HOST_DEVICE int tiles() const { return (channels + kBnTileChannels - 1) / kBnTileChannels; }
  MGPU_HOST_DEVICE int64_t split_begin(int split) const { return split * rows_per_split; }
  MGPU_HOST_DEVICE int64_t split_end(int split) const {
    const int64_t end = (split + 1) * rows_per_split;
    return end < rows ? end : rows;
  }
  MGPU_HOST_DEVICE int64_t partial_floats() const { return int64_t{2} * splits * channels; }
};

// The kernels' split of a shape that FitsTheBatchNormKernels: about kBnTargetBlocks blocks of
// (split, tile), at least kBnMinRowsPerSplit rows a split where there are that many.
inline BatchNormShape MakeBatchNormShape(int64_t rows, int channels) {
  BatchNormShape s;
  s.rows = rows, s.channels = channels;
  const int64_t wanted = kBnTargetBlocks / s.tiles() > 1 ? kBnTargetBlocks / s.tiles() : 1;
  const int64_t most = (rows + kBnMinRowsPerSplit - 1) / kBnMinRowsPerSplit;
  const int64_t splits = wanted < most ? wanted : most;
  s.rows_per_split = (rows + splits - 1) / splits;
  s.splits = static_cast<int>((rows + s.rows_per_split - 1) / s.rows_per_split);
  return s;
}

// Whether the kernels take the shape: rows to sum over (ATen refuses one value per channel), whole
// vectors of channels, tiles within a grid's y dimension (65,535) and indices within their types.
inline bool FitsTheBatchNormKernels(int64_t rows, int64_t channels) {
  return rows > 1 && channels > 0 && channels % kBnVector == 0 && channels <= (1 << 20) &&
         rows * channels < (int64_t{1} << 46);
}

// The channels c, ..., c + kBnVector - 1 (from per-channel float arrays), into registers.
MGPU_HOST_DEVICE inline void LoadChannels(const float* array, int c, float* v) {
  MGPU_UNROLL
  for (int i = 0; i < kBnVector; ++i) v[i] = LoadReadOnly(array + c + i);
}

// ---- a block's (lane, vector) items: item i of a tile is lane i / kBnVectorsPerRow, vector
// i % kBnVectorsPerRow, so a warp reads four whole 128-byte rows of a 64-channel tile ----

struct TileItem {
  int lane, channel;  // channel: the vector's first channel
};

MGPU_HOST_DEVICE inline TileItem ItemOf(int tile, int item) {
  return {item / kBnVectorsPerRow, tile * kBnTileChannels + (item % kBnVectorsPerRow) * kBnVector};
}

// Calls add(v) with the item's kBnVector elements of x (as floats) in each row of `split` that its
// lane sums, in order; kRows rows' loads issued (packed) before any is added.
template <int kRows, typename T, typename Add>
MGPU_HOST_DEVICE inline void ForLaneRows(const BatchNormShape& s, const T* x, int split, TileItem item,
                                         const Add& add) {
  const int64_t end = s.split_end(split);
  for (int64_t base = s.split_begin(split) + item.lane; base < end; base += kRows * kBnRowLanes) {
    Packed<T> packed[kRows];
    MGPU_UNROLL
    for (int u = 0; u < kRows; ++u) {
      const int64_t row = base + u * kBnRowLanes;
      if (row < end) LoadPacked(x + row * s.channels + item.channel, &packed[u]);
    }
    MGPU_UNROLL
    for (int u = 0; u < kRows; ++u) {
      if (base + u * kBnRowLanes >= end) continue;
      float v[kBnVector];
      Unpack(packed[u], v);
      add(v);
    }
  }
}

// lane_sums (2 x kBnRowLanes x kBnTileChannels floats, shared) -> partials[which][split][c]: the
// lanes' sums added in lane order, for the tile's channels.
MGPU_HOST_DEVICE inline void StoreSplitPartials(const BatchNormShape& s, int split, int tile, const float* lane_sums,
                                                float* partials, int thread, int threads) {
  for (int i = thread; i < 2 * kBnTileChannels; i += threads) {
    const int which = i / kBnTileChannels, column = i % kBnTileChannels;
    const int c = tile * kBnTileChannels + column;
    if (c >= s.channels) continue;
    float sum = 0.f;
    for (int lane = 0; lane < kBnRowLanes; ++lane) {
      sum += lane_sums[(which * kBnRowLanes + lane) * kBnTileChannels + column];
    }
    partials[(int64_t{which} * s.splits + split) * s.channels + c] = sum;
  }
}

// ---- forward ----

// Each item's lane sums of d = x - x[0, c] and of d^2 over the split's rows, into lane_sums; kRows
// rows in flight (any number gives the same sums).
template <int kRows, typename T>
MGPU_HOST_DEVICE inline void StatisticsLaneSums(const BatchNormShape& s, const T* x, int split, int tile,
                                                float* lane_sums, int thread, int threads) {
  for (int i = thread; i < kBnBlockThreads; i += threads) {
    const TileItem item = ItemOf(tile, i);
    if (item.channel >= s.channels) continue;
    float shift[kBnVector], sum[kBnVector] = {}, squares[kBnVector] = {};
    LoadVector(x + item.channel, shift);
    ForLaneRows<kRows>(s, x, split, item, [&](const float* v) {
      MGPU_UNROLL
      for (int k = 0; k < kBnVector; ++k) {
        const float d = v[k] - shift[k];
        sum[k] += d;
        squares[k] = fmaf(d, d, squares[k]);
      }
    });
    const int column = item.channel - tile * kBnTileChannels;
    MGPU_UNROLL
    for (int k = 0; k < kBnVector; ++k) {
      lane_sums[item.lane * kBnTileChannels + column + k] = sum[k];
      lane_sums[(kBnRowLanes + item.lane) * kBnTileChannels + column + k] = squares[k];
    }
  }
}

constexpr int kSumLanes = 32;  // a finalize warp's lanes

// Lane `lane`'s sums of partials[0 and 1][split][c] over splits lane, lane + kSumLanes, ...
MGPU_HOST_DEVICE inline void LaneSplitSums(const BatchNormShape& s, const float* partials, int c, int lane,
                                           float* sums) {
  sums[0] = sums[1] = 0.f;
  for (int split = lane; split < s.splits; split += kSumLanes) {
    sums[0] += partials[int64_t{split} * s.channels + c];
    sums[1] += partials[(int64_t{s.splits} + split) * s.channels + c];
  }
}

// sums[2] <- the splits' partials of channel c, added as the header says. A warp's 32 threads
// call it together and all get the sums; on the host one call computes every lane's part.
MGPU_HOST_DEVICE inline void SplitSums(const BatchNormShape& s, const float* partials, int c, float* sums) {
#ifdef __CUDA_ARCH__
  LaneSplitSums(s, partials, c, threadIdx.x % kSumLanes, sums);
  MGPU_UNROLL
  for (int offset = kSumLanes / 2; offset > 0; offset /= 2) {
    sums[0] += __shfl_xor_sync(0xffffffffu, sums[0], offset);
    sums[1] += __shfl_xor_sync(0xffffffffu, sums[1], offset);
  }
#else
  float lanes[kSumLanes][2];
  for (int lane = 0; lane < kSumLanes; ++lane) LaneSplitSums(s, partials, c, lane, lanes[lane]);
  for (int offset = kSumLanes / 2; offset > 0; offset /= 2) {
    float added[kSumLanes][2];
    for (int lane = 0; lane < kSumLanes; ++lane) {
      for (int k = 0; k < 2; ++k) added[lane][k] = lanes[lane][k] + lanes[lane ^ offset][k];
    }
    std::memcpy(lanes, added, sizeof lanes);
  }
  sums[0] = lanes[0][0], sums[1] = lanes[0][1];
#endif
}

// The forward's per-channel parameters and outputs. running_mean and running_var may be null
// (a batch norm that tracks no running statistics), input_bias too (none folded in), and
// batches_tracked (num_batches_tracked, which channel 0's finalize counts up by one: ATen's add of
// its own was a kernel per batch norm, 20 of a ResNet-18's step).
struct BatchNormParameters {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  const float* input_bias = nullptr;
  int64_t* batches_tracked = nullptr;
  float eps = 1e-5f, momentum = 0.1f;
};

struct BatchNormStatistics {  // per channel, written by the finalize
  float* mean = nullptr;
  float* invstd = nullptr;
  float* scale = nullptr;  // gamma invstd
  float* shift = nullptr;  // beta - mean scale
};

// Channel c's statistics from its sums of d = x - first and d^2 over the M rows.
MGPU_HOST_DEVICE inline void FinalizeChannel(const BatchNormShape& s, const BatchNormParameters& p, int c,
                                             float first, const float* sums, const BatchNormStatistics& out) {
  const float rows = static_cast<float>(s.rows);
  const float mean_d = sums[0] / rows;
  const float variance = Relu(fmaf(-mean_d, mean_d, sums[1] / rows));  // rounding's negatives to 0, a NaN kept
  const float mean = first + mean_d;
  const float invstd = 1.f / sqrtf(variance + p.eps);
  const float scale = p.gamma[c] * invstd;
  out.mean[c] = mean, out.invstd[c] = invstd, out.scale[c] = scale;
  out.shift[c] = fmaf(-mean, scale, p.beta[c]);
  if (c == 0 && p.batches_tracked != nullptr) ++*p.batches_tracked;
  if (p.running_mean != nullptr) {
    // unbiased - running as one fmaf: nvcc would contract a product and a subtraction into one.
    const float unbiased_minus_running = fmaf(variance, rows / static_cast<float>(s.rows - 1), -p.running_var[c]);
    const float input_mean = p.input_bias != nullptr ? mean + p.input_bias[c] : mean;
    p.running_mean[c] = fmaf(p.momentum, input_mean - p.running_mean[c], p.running_mean[c]);
    p.running_var[c] = fmaf(p.momentum, unbiased_minus_running, p.running_var[c]);
  }
}

// act(z): relu's or none's.
MGPU_HOST_DEVICE inline float Activated(float z, bool relu) { return relu ? Relu(z) : z; }

// The element-wise pass: y = act(x scale + shift [+ residual]) over the split's rows of the item,
// kRows rows' loads in flight.
template <int kRows, typename T>
MGPU_HOST_DEVICE inline void ApplyItem(const BatchNormShape& s, const T* x, const T* residual,
                                       const BatchNormStatistics& st, bool relu, int split, TileItem item, T* y) {
  float scale[kBnVector], shift[kBnVector];
  LoadChannels(st.scale, item.channel, scale);
  LoadChannels(st.shift, item.channel, shift);
  const int64_t end = s.split_end(split);
  for (int64_t base = s.split_begin(split) + item.lane; base < end; base += kRows * kBnRowLanes) {
    Packed<T> packed_x[kRows], packed_residual[kRows];
    MGPU_UNROLL
    for (int u = 0; u < kRows; ++u) {
      const int64_t at = (base + u * kBnRowLanes) * s.channels + item.channel;
      if (base + u * kBnRowLanes >= end) continue;
      LoadPacked(x + at, &packed_x[u]);
      if (residual != nullptr) LoadPacked(residual + at, &packed_residual[u]);
    }
    MGPU_UNROLL
    for (int u = 0; u < kRows; ++u) {
      if (base + u * kBnRowLanes >= end) continue;
      float v[kBnVector], r[kBnVector] = {};
      Unpack(packed_x[u], v);
      if (residual != nullptr) Unpack(packed_residual[u], r);
      MGPU_UNROLL
      for (int k = 0; k < kBnVector; ++k) {
        const float z = fmaf(v[k], scale[k], shift[k]);
        v[k] = Activated(residual != nullptr ? z + r[k] : z, relu);
      }
      StoreVector(v, y + (base + u * kBnRowLanes) * s.channels + item.channel);
    }
  }
}

template <int kRows, typename T>
MGPU_HOST_DEVICE inline void Apply(const BatchNormShape& s, const T* x, const T* residual,
                                   const BatchNormStatistics& st, bool relu, int split, int tile, T* y, int thread,
                                   int threads) {
  for (int i = thread; i < kBnBlockThreads; i += threads) {
    const TileItem item = ItemOf(tile, i);
    if (item.channel < s.channels) ApplyItem<kRows>(s, x, residual, st, relu, split, item, y);
  }
}

// ---- backward ----

// The gradient that reaches bn's output (and the residual): ATen's threshold_backward, zero where
// relu's output is <= 0 (a NaN output passes gy).
MGPU_HOST_DEVICE inline float PassedGradient(float gy, float y, bool relu) { return relu && y <= 0.f ? 0.f : gy; }

// Where relu had no residual, the backward masks the gradient where relu's output y =
// RoundedTo<T>(Relu(z)), z = x scale + shift, is <= 0, without computing y: z <=
// LargestMaskedInput<T>(). Relu(z) is 0 for z <= 0 (-0 for -0) and z itself otherwise (a NaN too,
// which passes); rounded to bfloat16, a positive z becomes 0 exactly where its bits are <= 0x8000
// (float32 denormals: (bits + 0x7fff) >> 16 is 0, the tie at 0x8000 going to the even 0). One
// comparison instead of relu, the rounding and a comparison: the recomputing passes read only x and
// gy and were short of issue slots; ResNet-50's batch norms' backward went from 11.9 to 11.2 ms a
// step on an H200 (bench/results/2026-11-29-1xH200-bn-bandwidth, call 2).
template <typename T>
MGPU_HOST_DEVICE inline float LargestMaskedInput();
template <>
MGPU_HOST_DEVICE inline float LargestMaskedInput<float>() {
  return 0.f;
}
template <>
MGPU_HOST_DEVICE inline float LargestMaskedInput<Bf16>() {
  return BitsToFloat(0x8000u);
}

// Where a backward pass finds g, the gradient that relu passes to bn's output (and the residual):
// from gy, or gy + gy2 rounded to T (two consumers' gradients of y, which ATen's autograd engine
// would add in an element-wise pass of its own and round), through relu's mask: y where it is read
// (relu with a residual), else recomputed from x. In the apply pass where bn had a residual, gy is
// g itself, which the sums pass stored as the residual's gradient, with no relu (one tensor read
// instead of gy, gy2 and y).
template <typename T>
struct GradientSource {
  const T* gy = nullptr;
  const T* gy2 = nullptr;  // none: null
  const T* y = nullptr;    // null where relu's output is recomputed (or there is no relu)

  MGPU_HOST_DEVICE bool recomputes(bool relu) const { return relu && y == nullptr; }
};

// A backward item's per-channel values: the mean, and the forward's scale and shift where it
// recomputes y.
struct GradientItemChannels {
  float mean[kBnVector], scale[kBnVector], shift[kBnVector];
  bool recompute;

  MGPU_HOST_DEVICE GradientItemChannels(const BatchNormStatistics& st, bool recomputes, int channel)
      : recompute(recomputes) {
    LoadChannels(st.mean, channel, mean);
    if (recompute) {
      LoadChannels(st.scale, channel, scale);
      LoadChannels(st.shift, channel, shift);
    }
  }
  // The gradient relu passes at an element: gy where y > 0 (or no relu), y read or recomputed.
  template <typename T>
  MGPU_HOST_DEVICE float Passed(float gy, float x, float y, bool relu, int k) const {
    if (!relu) return gy;
    if (recompute) return fmaf(x, scale[k], shift[k]) <= LargestMaskedInput<T>() ? 0.f : gy;
    return PassedGradient(gy, y, true);
  }
};

// Calls use(at, x, g) for the rows of `split` that the item's lane takes, in order: `at` the row's
// offset of the item's vector, x its kBnVector inputs, g the gradients relu passes to them (from
// `source`); kRows rows' loads issued (packed) before any is used.
template <int kRows, typename T, typename Use>
MGPU_HOST_DEVICE inline void ForGradientRows(const BatchNormShape& s, const T* x, const GradientSource<T>& source,
                                             const GradientItemChannels& channels, bool relu, int split,
                                             TileItem item, const Use& use) {
  const bool read_y = relu && !channels.recompute;
  const int64_t end = s.split_end(split);
  for (int64_t base = s.split_begin(split) + item.lane; base < end; base += kRows * kBnRowLanes) {
    Packed<T> packed_x[kRows], packed_g[kRows], packed_g2[kRows], packed_y[kRows];
    MGPU_UNROLL
    for (int u = 0; u < kRows; ++u) {
      const int64_t at = (base + u * kBnRowLanes) * s.channels + item.channel;
      if (base + u * kBnRowLanes >= end) continue;
      LoadPacked(x + at, &packed_x[u]);
      LoadPacked(source.gy + at, &packed_g[u]);
      if (source.gy2 != nullptr) LoadPacked(source.gy2 + at, &packed_g2[u]);
      if (read_y) LoadPacked(source.y + at, &packed_y[u]);
    }
    MGPU_UNROLL
    for (int u = 0; u < kRows; ++u) {
      if (base + u * kBnRowLanes >= end) continue;
      float xv[kBnVector], gv[kBnVector], g2[kBnVector] = {}, yv[kBnVector] = {};
      Unpack(packed_x[u], xv);
      Unpack(packed_g[u], gv);
      if (source.gy2 != nullptr) Unpack(packed_g2[u], g2);
      if (read_y) Unpack(packed_y[u], yv);
      MGPU_UNROLL
      for (int k = 0; k < kBnVector; ++k) {
        const float g = source.gy2 != nullptr ? RoundedTo<T>(gv[k] + g2[k]) : gv[k];
        gv[k] = channels.Passed<T>(g, xv[k], yv[k], relu, k);
      }
      use((base + u * kBnRowLanes) * s.channels + item.channel, xv, gv);
    }
  }
}

// Each item's lane sums of g and of g (x - mean) over the split's rows, into lane_sums; and g
// itself, unless gresidual is null, as the residual's gradient (which the apply pass reads back).
// kRows rows in flight (any number gives the same sums).
template <int kRows, typename T>
MGPU_HOST_DEVICE inline void GradientLaneSums(const BatchNormShape& s, const T* x, const GradientSource<T>& source,
                                              const BatchNormStatistics& st, bool relu, int split, int tile,
                                              float* lane_sums, T* gresidual, int thread, int threads) {
  for (int i = thread; i < kBnBlockThreads; i += threads) {
    const TileItem item = ItemOf(tile, i);
    if (item.channel >= s.channels) continue;
    const GradientItemChannels channels(st, source.recomputes(relu), item.channel);
    float sum[kBnVector] = {}, products[kBnVector] = {};
    ForGradientRows<kRows>(s, x, source, channels, relu, split, item, [&](int64_t at, const float* xv, const float* g) {
      if (gresidual != nullptr) StoreVector(g, gresidual + at);
      MGPU_UNROLL
      for (int k = 0; k < kBnVector; ++k) {
        sum[k] += g[k];
        products[k] = fmaf(g[k], xv[k] - channels.mean[k], products[k]);
      }
    });
    const int column = item.channel - tile * kBnTileChannels;
    MGPU_UNROLL
    for (int k = 0; k < kBnVector; ++k) {
      lane_sums[item.lane * kBnTileChannels + column + k] = sum[k];
      lane_sums[(kBnRowLanes + item.lane) * kBnTileChannels + column + k] = products[k];
    }
  }
}

struct BatchNormGradients {
  float* gamma = nullptr;  // d loss / d gamma, d loss / d beta
  float* beta = nullptr;
  // gx = a g + b (x - mean) + c, per channel
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
};

// Channel c's gradients of gamma and beta and gx's coefficients from its sums of g and
// g (x - mean) over the M rows: ATen's gx = gamma invstd (g - mean(g) - x̂ mean(g x̂)).
MGPU_HOST_DEVICE inline void FinalizeGradientChannel(const BatchNormShape& s, const float* gamma, const float* invstd,
                                                     int c, const float* sums, const BatchNormGradients& out) {
  const float rows = static_cast<float>(s.rows);
  const float a = gamma[c] * invstd[c];
  out.gamma[c] = sums[1] * invstd[c];
  out.beta[c] = sums[0];
  out.a[c] = a;
  out.b[c] = -a * invstd[c] * invstd[c] * (sums[1] / rows);
  out.c[c] = -a * (sums[0] / rows);
}

// gx over the split's rows of the item, kRows rows' loads in flight.
template <int kRows, typename T>
MGPU_HOST_DEVICE inline void GradientApplyItem(const BatchNormShape& s, const T* x, const GradientSource<T>& source,
                                               const BatchNormStatistics& st, const BatchNormGradients& coefficients,
                                               bool relu, int split, TileItem item, T* gx) {
  const GradientItemChannels channels(st, source.recomputes(relu), item.channel);
  float a[kBnVector], b[kBnVector], c[kBnVector];
  LoadChannels(coefficients.a, item.channel, a);
  LoadChannels(coefficients.b, item.channel, b);
  LoadChannels(coefficients.c, item.channel, c);
  ForGradientRows<kRows>(s, x, source, channels, relu, split, item, [&](int64_t at, const float* xv, const float* g) {
    float gxv[kBnVector];
    MGPU_UNROLL
    for (int k = 0; k < kBnVector; ++k) gxv[k] = fmaf(b[k], xv[k] - channels.mean[k], fmaf(a[k], g[k], c[k]));
    StoreVector(gxv, gx + at);
  });
}

template <int kRows, typename T>
MGPU_HOST_DEVICE inline void GradientApply(const BatchNormShape& s, const T* x, const GradientSource<T>& source,
                                           const BatchNormStatistics& st, const BatchNormGradients& coefficients,
                                           bool relu, int split, int tile, T* gx, int thread, int threads) {
  for (int i = thread; i < kBnBlockThreads; i += threads) {
    const TileItem item = ItemOf(tile, i);
    if (item.channel < s.channels) GradientApplyItem<kRows>(s, x, source, st, coefficients, relu, split, item, gx);
  }
}

}  // namespace mgpu::kernels
