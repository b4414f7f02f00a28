// The arithmetic of mgpu's fused fully connected head, y = L_{M-1}(relu(... relu(L_0(x)) ...)) with
// L_l(v) = v W_lᵀ + b_l, as the phases of its CUDA kernels' thread blocks (linear_chain_kernels.cu;
// block_phases.h says what a phase is), which the CPU tests run block by block
// (tests/support/linear_chain_on_host.h).
//
// Shapes (float32, contiguous, row-major; M layers, F_l features into layer l, F_M out of the last):
//   x (N, F_0); W_l (F_{l+1}, F_l), b_l (F_{l+1}); y (N, F_M)
//   hidden   each hidden layer's outputs after relu, layer after layer: layer l < M - 1's
//            (N, F_{l+1}) at N * hidden_offset(l)
//   ghidden  the gradient reaching their pre-activations (relu's backward applied), the same layout
// Semantics are ATen's for relu (NaN passes; its backward passes a gradient where the output > 0).
// Products are summed with fmaf in a fixed order that the block's size never changes, so the
// same bits every run:
//   a layer's output: lane j of a warp sums inputs j, j + 32, ... in order, then the 32 lanes' sums
//     are added pairwise, offsets 16, 8, 4, 2, 1 (WarpDots: a butterfly, as __shfl_xor_sync adds);
//     then the bias;
//   an input's gradient: input_gradient_parts(l) parts sum consecutive outputs' terms in order,
//     then the parts are added in order;
//   a parameter's gradient: over the samples in order (a bias's as fmaf(g, 1, sum)).
//
// Kernels:
//   forward          a block per sample n: x[n], each layer's outputs in shared memory, y[n], hidden
//   input gradient   a block per sample n: gy[n], back layer by layer, ghidden and (if wanted) gx[n]
//   parameter grads  a block per tile of a layer's weights and bias
#pragma once

#include "models/kernels/block_phases.h"

namespace mgpu::kernels {

constexpr int kMaxChainLayers = 4;
// The per-sample blocks' threads: at a head's sizes (hundreds of features) a block reads every
// weight once from L2, and more warps keep more of those loads in flight.
constexpr int kChainBlockThreads = 1024;
constexpr int kWarpSize = 32;
// Rows of W whose dot products one warp computes at once (each lane's loads serve all of them).
constexpr int kRowsPerWarp = 4;

struct LinearChainShape {
  int batch = 0, layers = 0;
  int features[kMaxChainLayers + 1] = {};  // F_0 .. F_M

  MGPU_HOST_DEVICE int in_features(int l) const { return features[l]; }
  MGPU_HOST_DEVICE int out_features(int l) const { return features[l + 1]; }
  // Features of the hidden layers before layer l's outputs (l < layers - 1), and of all of them.
  MGPU_HOST_DEVICE int hidden_offset(int l) const {
    int sum = 0;
    for (int j = 1; j <= l; ++j) sum += features[j];
    return sum;
  }
  MGPU_HOST_DEVICE int hidden_features() const { return hidden_offset(layers - 1); }
  // Where layer l's input vector starts in the forward block's buffer of every layer's vector.
  MGPU_HOST_DEVICE int vector_offset(int l) const {
    int sum = 0;
    for (int j = 0; j < l; ++j) sum += features[j];
    return sum;
  }
  // How many parts sum layer l's input gradient: enough for a block's threads to share its inputs.
  MGPU_HOST_DEVICE int input_gradient_parts(int l) const {
    const int parts = kChainBlockThreads / in_features(l);
    return parts < 1 ? 1 : parts > out_features(l) ? out_features(l) : parts;
  }
  MGPU_HOST_DEVICE int widest() const {
    int widest = 0;
    for (int l = 0; l <= layers; ++l) widest = features[l] > widest ? features[l] : widest;
    return widest;
  }

  // Every layer's vector: x[n], then each layer's outputs.
  MGPU_HOST_DEVICE int forward_shared_floats() const { return vector_offset(layers + 1); }
  // The gradient of every such vector (at the same offsets), then the parts' sums.
  MGPU_HOST_DEVICE int input_gradient_shared_floats() const {
    const int parts = widest() > kChainBlockThreads ? widest() : kChainBlockThreads;
    return forward_shared_floats() + parts;
  }
};

// The layers' parameters and their gradients, as the kernels take them (by value).
struct LinearChainParameters {
  const float* weight[kMaxChainLayers] = {};
  const float* bias[kMaxChainLayers] = {};
};
struct LinearChainGradients {
  float* weight[kMaxChainLayers] = {};
  float* bias[kMaxChainLayers] = {};
};

// Whether the kernels take shape s: 1 to kMaxChainLayers layers, a sample and a feature at least
// everywhere, blocks within kMaxSharedFloats, and every index within int.
inline bool FitsTheKernels(const LinearChainShape& s) {
  constexpr int64_t kMaxIndex = int64_t{1} << 31;
  if (s.batch < 1 || s.layers < 1 || s.layers > kMaxChainLayers) return false;
  int64_t parameters = 0, features = 0;
  for (int l = 0; l <= s.layers; ++l) {
    if (s.features[l] < 1) return false;
    features += s.features[l];
    if (l < s.layers) parameters += int64_t{s.features[l + 1]} * (s.features[l] + 1);
  }
  return parameters < kMaxIndex && s.batch * features < kMaxIndex && features <= kMaxSharedFloats &&
         s.input_gradient_shared_floats() <= kMaxSharedFloats;
}

// ---- forward: a block per sample ----

// dots[r] <- row r of W (rows x count, row-major, r < rows <= kRowsPerWarp) dotted with v, summed
// as the header says. A warp's 32 threads call it together and all get the sums; on the host one
// call computes every lane's part. Rows past `rows` repeat the last (their sums are not used), so
// that every lane runs the same loads and FMAs.
MGPU_HOST_DEVICE inline void LaneDots(const float* rows_of_w, int count, int rows, const float* v, int lane,
                                      float* dots) {
  const float* row[kRowsPerWarp];
  MGPU_UNROLL
  for (int r = 0; r < kRowsPerWarp; ++r) {
    row[r] = rows_of_w + int64_t{r < rows ? r : rows - 1} * count;
    dots[r] = 0.f;
  }
  MGPU_UNROLL_BY_8
  for (int i = lane; i < count; i += kWarpSize) {
    const float value = v[i];
    MGPU_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) dots[r] = fmaf(LoadReadOnly(row[r] + i), value, dots[r]);
  }
}

MGPU_HOST_DEVICE inline void WarpDots(const float* rows_of_w, int count, int rows, const float* v, float* dots) {
#ifdef __CUDA_ARCH__
  LaneDots(rows_of_w, count, rows, v, threadIdx.x % kWarpSize, dots);
  MGPU_UNROLL
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    MGPU_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) dots[r] += __shfl_xor_sync(0xffffffffu, dots[r], offset);
  }
#else
  float lanes[kWarpSize][kRowsPerWarp];
  for (int lane = 0; lane < kWarpSize; ++lane) LaneDots(rows_of_w, count, rows, v, lane, lanes[lane]);
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    float added[kWarpSize][kRowsPerWarp];
    for (int lane = 0; lane < kWarpSize; ++lane) {
      for (int r = 0; r < kRowsPerWarp; ++r) added[lane][r] = lanes[lane][r] + lanes[lane ^ offset][r];
    }
    for (int lane = 0; lane < kWarpSize; ++lane) {
      for (int r = 0; r < kRowsPerWarp; ++r) lanes[lane][r] = added[lane][r];
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) dots[r] = lanes[0][r];
#endif
}

// Whether this thread is its warp's first (the one that stores a warp's result); on the host, yes.
MGPU_HOST_DEVICE inline bool FirstLane() {
#ifdef __CUDA_ARCH__
  return threadIdx.x % kWarpSize == 0;
#else
  return true;
#endif
}

// out <- layer l of `in` (relu'd unless l is the last): warp `warp` of `warps` computes rows
// kRowsPerWarp at a time. The host calls it with (0, 1).
MGPU_HOST_DEVICE inline void LayerForward(const LinearChainShape& s, const LinearChainParameters& p, int l,
                                          const float* in, float* out, int warp, int warps) {
  const int inputs = s.in_features(l), outputs = s.out_features(l);
  const bool last = l == s.layers - 1;
  for (int first = warp * kRowsPerWarp; first < outputs; first += warps * kRowsPerWarp) {
    const int rows = outputs - first < kRowsPerWarp ? outputs - first : kRowsPerWarp;
    float dots[kRowsPerWarp];
    WarpDots(p.weight[l] + int64_t{first} * inputs, inputs, rows, in, dots);
    if (!FirstLane()) continue;
    for (int r = 0; r < rows; ++r) {
      const float z = dots[r] + p.bias[l][first + r];
      out[first + r] = last ? z : Relu(z);
    }
  }
}

// y[n] and hidden[:, n] <- the block's vectors (vectors: every layer's, from x[n] on).
MGPU_HOST_DEVICE inline void StoreForwardOutputs(const LinearChainShape& s, const float* vectors, int n, float* y,
                                                 float* hidden, int thread, int threads) {
  MGPU_UNROLL
  for (int l = 0; l < kMaxChainLayers; ++l) {
    if (l >= s.layers) break;
    const int outputs = s.out_features(l);
    const float* out = vectors + s.vector_offset(l + 1);
    float* dst = l == s.layers - 1 ? y + int64_t{n} * outputs
                                   : hidden + int64_t{s.batch} * s.hidden_offset(l) + int64_t{n} * outputs;
    for (int o = thread; o < outputs; o += threads) dst[o] = out[o];
  }
}

// ---- backward, inputs: a block per sample ----

// sums[part * F_l + i] <- part `part` of layer l's input gradient at input i: the terms W_l[o, i]
// gout[o] of the part's consecutive outputs o, in order.
MGPU_HOST_DEVICE inline void SumInputGradientParts(const LinearChainShape& s, const LinearChainParameters& p, int l,
                                                   const float* gout, float* sums, int thread, int threads) {
  const int inputs = s.in_features(l), outputs = s.out_features(l), parts = s.input_gradient_parts(l);
  const int per_part = (outputs + parts - 1) / parts;
  const float* w = p.weight[l];
  for (int e = thread; e < inputs * parts; e += threads) {
    const int i = e % inputs, part = e / inputs;
    const int end = (part + 1) * per_part < outputs ? (part + 1) * per_part : outputs;
    float sum = 0.f;
    MGPU_UNROLL_BY_8
    for (int o = part * per_part; o < end; ++o) sum = fmaf(LoadReadOnly(w + int64_t{o} * inputs + i), gout[o], sum);
    sums[e] = sum;
  }
}

// gin <- layer l's input gradient, the parts added in order, through the relu of the layer before
// (whose outputs, hidden[:, n], are l's inputs) unless l is the first; dst[n] <- gin, dst being
// ghidden's layer l - 1, or gx for l = 0.
MGPU_HOST_DEVICE inline void AddInputGradientParts(const LinearChainShape& s, int l, const float* sums,
                                                   const float* hidden, int n, float* gin, float* dst, int thread,
                                                   int threads) {
  const int inputs = s.in_features(l), parts = s.input_gradient_parts(l);
  const int64_t at = (l == 0 ? 0 : int64_t{s.batch} * s.hidden_offset(l - 1)) + int64_t{n} * inputs;
  for (int i = thread; i < inputs; i += threads) {
    float g = 0.f;
    for (int part = 0; part < parts; ++part) g += sums[part * inputs + i];
    if (l > 0 && !(LoadReadOnly(hidden + at + i) > 0.f)) g = 0.f;
    gin[i] = g;
    dst[at + i] = g;
  }
}

// ---- backward, parameters: a block per tile of a layer's gradient ----
//
// Layer l's parameters as a (F_{l+1}, F_l + 1) matrix, the bias its last column: the gradient of
// (o, i) is, over the samples in order, the sum of gout_l[n, o] in_l[n, i], where gout_l is gy for
// the last layer and ghidden's layer l for the others, and in_l is x for the first layer and
// hidden's layer l - 1 for the others, with in_l[n, F_l] = 1 (the bias; fmaf(g, 1, sum) is g + sum).
// A block computes a tile of kTileOutputs x kTileColumns of it, kTileSamples samples at a time
// from copies in shared memory, so that each value it reads from global memory serves a row or a
// column of the tile.
constexpr int kTileOutputs = 16, kTileColumns = 64, kTileSamples = 32;
constexpr int kTileFloats = kTileOutputs * kTileColumns;

MGPU_HOST_DEVICE inline int ColumnTiles(const LinearChainShape& s, int l) {
  return (s.in_features(l) + 1 + kTileColumns - 1) / kTileColumns;
}
MGPU_HOST_DEVICE inline int ParameterTiles(const LinearChainShape& s, int l) {
  return (s.out_features(l) + kTileOutputs - 1) / kTileOutputs * ColumnTiles(s, l);
}
// The blocks before layer l's tiles; FirstParameterTile(s, s.layers) is the grid's size.
MGPU_HOST_DEVICE inline int FirstParameterTile(const LinearChainShape& s, int l) {
  int sum = 0;
  for (int j = 0; j < l; ++j) sum += ParameterTiles(s, j);
  return sum;
}
// gout_chunk (kTileSamples, kTileOutputs) and in_chunk (kTileSamples, kTileColumns) <- the tile's
// rows and columns of samples first, first + 1, ... (zeros past the batch, the layer's outputs
// and its columns).
MGPU_HOST_DEVICE inline void LoadParameterTileChunk(const LinearChainShape& s, int l, int tile, int first,
                                                    const float* x, const float* hidden, const float* gy,
                                                    const float* ghidden, float* gout_chunk, float* in_chunk,
                                                    int thread, int threads) {
  const int inputs = s.in_features(l), outputs = s.out_features(l);
  const int first_output = tile / ColumnTiles(s, l) * kTileOutputs;
  const int first_column = tile % ColumnTiles(s, l) * kTileColumns;
  const float* gout = l == s.layers - 1 ? gy : ghidden + int64_t{s.batch} * s.hidden_offset(l);
  const float* in = l == 0 ? x : hidden + int64_t{s.batch} * s.hidden_offset(l - 1);
  Stage(kTileSamples * kTileOutputs, thread, threads,
        [&](int e) {
          const int n = first + e / kTileOutputs, o = first_output + e % kTileOutputs;
          return n < s.batch && o < outputs ? LoadReadOnly(gout + int64_t{n} * outputs + o) : 0.f;
        },
        [&](int e, float value) { gout_chunk[e] = value; });
  Stage(kTileSamples * kTileColumns, thread, threads,
        [&](int e) {
          const int n = first + e / kTileColumns, i = first_column + e % kTileColumns;
          if (n >= s.batch || i > inputs) return 0.f;
          return i == inputs ? 1.f : LoadReadOnly(in + int64_t{n} * inputs + i);
        },
        [&](int e, float value) { in_chunk[e] = value; });
}

// sums[r * kTileColumns + c] <- itself (0 for the first chunk) plus the chunk's terms of the
// tile's (r, c), in sample order.
MGPU_HOST_DEVICE inline void AccumulateParameterTileChunk(const float* gout_chunk, const float* in_chunk,
                                                          bool first_chunk, float* sums, int thread, int threads) {
  for (int e = thread; e < kTileFloats; e += threads) {
    const int r = e / kTileColumns, c = e % kTileColumns;
    float sum = first_chunk ? 0.f : sums[e];
    MGPU_UNROLL_BY_8
    for (int n = 0; n < kTileSamples; ++n) sum = fmaf(gout_chunk[n * kTileOutputs + r], in_chunk[n * kTileColumns + c], sum);
    sums[e] = sum;
  }
}

// The gradients of layer l's parameters in the tile <- sums.
MGPU_HOST_DEVICE inline void StoreParameterTile(const LinearChainShape& s, int l, int tile, const float* sums,
                                                const LinearChainGradients& g, int thread, int threads) {
  const int inputs = s.in_features(l), outputs = s.out_features(l);
  const int first_output = tile / ColumnTiles(s, l) * kTileOutputs;
  const int first_column = tile % ColumnTiles(s, l) * kTileColumns;
  for (int e = thread; e < kTileFloats; e += threads) {
    const int o = first_output + e / kTileColumns, i = first_column + e % kTileColumns;
    if (o >= outputs || i > inputs) continue;
    if (i == inputs) {
      g.bias[l][o] = sums[e];
    } else {
      g.weight[l][int64_t{o} * inputs + i] = sums[e];
    }
  }
}

}  // namespace mgpu::kernels
