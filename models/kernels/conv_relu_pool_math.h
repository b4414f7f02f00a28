// The arithmetic of mgpu's fused convolution stage, y = max_pool2d(relu(conv2d(x, w) + b), 2), as
// the phases of its CUDA kernels' thread blocks (conv_relu_pool_kernels.cu; block_phases.h says what
// a phase is), which the CPU tests run block by block (tests/support/conv_relu_pool_on_host.h).
//
// Shapes (float32, contiguous NCHW; square filters, stride 1, dilation 1, groups 1, padding P at
// most R - 1; 2x2 pooling, stride 2, floor mode):
//   x (N, C, H, W), w (K, C, R, R), b (K)
//   conv (N, K, OH, OW), OH = H + 2P - R + 1; the pooling reads its first 2 PH x 2 PW ("covered")
//   y (N, K, PH, PW), PH = OH / 2; window (N, K, PH, PW): which of the 2x2 conv outputs y took,
//   0..3 in row-major order.
// Semantics are ATen's for relu (NaN passes) and max_pool2d (the first maximum of the window in
// row-major order, a NaN wins), and relu's backward passes a gradient where y > 0. Products are
// summed with fmaf in a fixed order (the block's size never changes it), so the same bits every run.
//
// Block-local buffers ("shared"), sized by the shape's *_floats():
//   xpad   x[n] zero-padded: (C, H + 2P, W + 2P), rows xpad_pitch() apart
//          (an odd pitch, so that the rows a warp reads start in different banks)
//   filter w[k]: (C, R, R), or w[:, c]: (K, R, R)
//   conv   one conv plane's covered part: (2 PH, 2 PW)
//   gpad   the conv gradient of sample n, all K planes, zero-padded by R - 1 - P: (K, H + R - 1, W + R - 1),
//          rows gpad_pitch() apart (odd), as WritePaddedConvGradient leaves it in global memory
#pragma once

#include "models/kernels/block_phases.h"

namespace mgpu::kernels {

// Every block's threads; it also sets how many groups sum a filter's gradient.
constexpr int kBlockThreads = 256;

struct ConvReluPoolShape {
  int batch = 0, in_channels = 0, height = 0, width = 0;  // x
  int out_channels = 0, kernel = 0, padding = 0;          // w: (out_channels, in_channels, kernel, kernel)
  int pooled_height = 0, pooled_width = 0;                // y

  MGPU_HOST_DEVICE int padded_height() const { return height + 2 * padding; }
  MGPU_HOST_DEVICE int padded_width() const { return width + 2 * padding; }
  MGPU_HOST_DEVICE int xpad_pitch() const { return padded_width() | 1; }
  MGPU_HOST_DEVICE int covered_height() const { return 2 * pooled_height; }
  MGPU_HOST_DEVICE int covered_width() const { return 2 * pooled_width; }
  MGPU_HOST_DEVICE int covered() const { return covered_height() * covered_width(); }
  MGPU_HOST_DEVICE int gradient_padding() const { return kernel - 1 - padding; }
  MGPU_HOST_DEVICE int gpad_height() const { return height + kernel - 1; }
  MGPU_HOST_DEVICE int gpad_width() const { return width + kernel - 1; }
  MGPU_HOST_DEVICE int gpad_pitch() const { return gpad_width() | 1; }
  MGPU_HOST_DEVICE int pixel_pairs() const { return height * ((width + 1) / 2); }
  // A filter's gradient terms: its C R R weights, then its bias.
  MGPU_HOST_DEVICE int terms() const { return in_channels * kernel * kernel + 1; }
  // How many groups of covered conv rows (row % groups) sum each term before the groups are added.
  MGPU_HOST_DEVICE int term_groups() const {
    const int groups = kBlockThreads / terms();
    return groups < 1 ? 1 : groups > covered_height() ? covered_height() : groups;
  }

  MGPU_HOST_DEVICE int xpad_floats() const { return in_channels * padded_height() * xpad_pitch(); }
  MGPU_HOST_DEVICE int filter_floats() const { return in_channels * kernel * kernel; }
  MGPU_HOST_DEVICE int channel_filters_floats() const { return out_channels * kernel * kernel; }
  MGPU_HOST_DEVICE int gpad_floats() const { return out_channels * gpad_height() * gpad_pitch(); }
  MGPU_HOST_DEVICE int forward_shared_floats() const { return xpad_floats() + filter_floats() + covered(); }
  MGPU_HOST_DEVICE int weight_gradient_shared_floats() const {
    return xpad_floats() + covered() + terms() * term_groups();
  }
  MGPU_HOST_DEVICE int input_gradient_shared_floats() const { return gpad_floats() + channel_filters_floats(); }
};

inline ConvReluPoolShape MakeConvReluPoolShape(int batch, int in_channels, int height, int width,
                                               int out_channels, int kernel, int padding) {
  ConvReluPoolShape s;
  s.batch = batch, s.in_channels = in_channels, s.height = height, s.width = width;
  s.out_channels = out_channels, s.kernel = kernel, s.padding = padding;
  s.pooled_height = (height + 2 * padding - kernel + 1) / 2;
  s.pooled_width = (width + 2 * padding - kernel + 1) / 2;
  return s;
}

// Whether the kernels take shape s: a pooled output at least, padding at most R - 1, and every
// block's buffers within kMaxSharedFloats (which also keeps a sample's indices within int).
inline bool FitsTheKernels(const ConvReluPoolShape& s) {
  return s.batch > 0 && s.pooled_height > 0 && s.pooled_width > 0 && s.padding >= 0 && s.padding <= s.kernel - 1 &&
         s.forward_shared_floats() <= kMaxSharedFloats &&
         s.weight_gradient_shared_floats() <= kMaxSharedFloats && s.input_gradient_shared_floats() <= kMaxSharedFloats;
}

// kKernel: the filter size known at compile time (the loops unroll), or 0 to read s.kernel.
template <int kKernel>
MGPU_HOST_DEVICE inline int FilterSize(const ConvReluPoolShape& s) {
  return kKernel > 0 ? kKernel : s.kernel;
}

// ---- forward: a block per (n, k) ----

// xpad <- x[n], zero-padded.
MGPU_HOST_DEVICE inline void LoadPaddedInput(const ConvReluPoolShape& s, const float* x, int n, float* xpad,
                                             int thread, int threads) {
  const int ph = s.padded_height(), pitch = s.xpad_pitch();
  const float* sample = x + int64_t{n} * s.in_channels * s.height * s.width;
  const auto load = [&](int i) {
    const int c = i / (ph * pitch), ih = i / pitch % ph - s.padding, iw = i % pitch - s.padding;
    const bool inside = ih >= 0 && ih < s.height && iw >= 0 && iw < s.width;
    return inside ? sample[(c * s.height + ih) * s.width + iw] : 0.f;
  };
  Stage(s.xpad_floats(), thread, threads, load, [&](int i, float value) { xpad[i] = value; });
}

// conv <- the covered conv outputs of filter (filter: w[k]), without the bias; sums over c, r, q.
// Two outputs per element, (oh, ow) and (oh, ow + PW), so that each tap loaded from the buffer
// serves two sums while a warp's threads read consecutive columns.
template <int kKernel>
MGPU_HOST_DEVICE inline void ConvolveCovered(const ConvReluPoolShape& s, const float* xpad, const float* filter,
                                             float* conv, int thread, int threads) {
  const int R = FilterSize<kKernel>(s), pitch = s.xpad_pitch(), plane = s.padded_height() * pitch;
  const int half = s.pooled_width;
  for (int i = thread; i < s.covered() / 2; i += threads) {
    const int oh = i / half, ow = i % half;
    float left = 0.f, right = 0.f;
    for (int c = 0; c < s.in_channels; ++c) {
      const float* window = xpad + c * plane + oh * pitch + ow;
      const float* taps = filter + c * R * R;
      for (int r = 0; r < R; ++r) {
        for (int q = 0; q < R; ++q) {
          const float tap = taps[r * R + q];
          left = fmaf(window[r * pitch + q], tap, left);
          right = fmaf(window[r * pitch + q + half], tap, right);
        }
      }
    }
    conv[oh * s.covered_width() + ow] = left;
    conv[oh * s.covered_width() + ow + half] = right;
  }
}

// y[n, k] and window[n, k] from conv (filter k's covered plane for sample n) and bias.
MGPU_HOST_DEVICE inline void PoolRelu(const ConvReluPoolShape& s, const float* conv, float bias, int n, int k,
                                      float* y, uint8_t* window, int thread, int threads) {
  const int64_t first = (int64_t{n} * s.out_channels + k) * s.pooled_height * s.pooled_width;
  for (int p = thread; p < s.pooled_height * s.pooled_width; p += threads) {
    const int top_left = 2 * (p / s.pooled_width) * s.covered_width() + 2 * (p % s.pooled_width);
    float best = -INFINITY;
    int best_at = 0;
    for (int at = 0; at < 4; ++at) {
      const float z = conv[top_left + (at / 2) * s.covered_width() + at % 2] + bias;
      const float v = Relu(z);
      if (v > best || v != v) best = v, best_at = at;
    }
    y[first + p] = best;
    window[first + p] = static_cast<uint8_t>(best_at);
  }
}

// ---- backward, weights: a block per (n, k) ----

// gconv <- the gradient reaching filter k's covered conv outputs for sample n: gy where the pooling
// took the output and relu passed it, else 0.
MGPU_HOST_DEVICE inline void GatherConvGradient(const ConvReluPoolShape& s, const float* gy, const float* y,
                                                const uint8_t* window, int n, int k, float* gconv, int thread,
                                                int threads) {
  const int64_t first = (int64_t{n} * s.out_channels + k) * s.pooled_height * s.pooled_width;
  const auto load = [&](int i) {
    const int oh = i / s.covered_width(), ow = i % s.covered_width();
    const int64_t p = first + (oh / 2) * s.pooled_width + ow / 2;
    const int taken = window[p];  // three independent loads, not a chain of conditional ones
    const float output = y[p], gradient = gy[p];
    return (taken == (oh % 2) * 2 + ow % 2) & (output > 0.f) ? gradient : 0.f;
  };
  Stage(s.covered(), thread, threads, load, [&](int i, float g) { gconv[i] = g; });
}

// padded[n, k] <- gconv zero-padded by R - 1 - P: the input gradient's view of it, as
// (N, K, H + R - 1, W + R - 1).
MGPU_HOST_DEVICE inline void WritePaddedConvGradient(const ConvReluPoolShape& s, const float* gconv, int n, int k,
                                                     float* padded, int thread, int threads) {
  const int pitch = s.gpad_pitch(), pad = s.gradient_padding();
  float* plane = padded + int64_t{n * s.out_channels + k} * s.gpad_height() * pitch;
  for (int i = thread; i < s.gpad_height() * pitch; i += threads) {
    const int oh = i / pitch - pad, ow = i % pitch - pad;
    const bool inside = oh >= 0 && oh < s.covered_height() && ow >= 0 && ow < s.covered_width();
    plane[i] = inside ? gconv[oh * s.covered_width() + ow] : 0.f;
  }
}

// sums[g * terms + j] <- term j of filter k's gradient over the covered conv rows g, g + G, ...
// (G = s.term_groups()), each row in order: weight (c, r, q) = (j / RR, j / R % R, j % R) or, for
// j = C R R, the bias.
template <int kKernel>
MGPU_HOST_DEVICE inline void SumTermsByGroup(const ConvReluPoolShape& s, const float* xpad, const float* gconv,
                                             float* sums, int thread, int threads) {
  const int R = FilterSize<kKernel>(s), pitch = s.xpad_pitch(), plane = s.padded_height() * pitch;
  const int terms = s.terms(), groups = s.term_groups(), cw = s.covered_width();
  for (int t = thread; t < terms * groups; t += threads) {
    const int j = t % terms, g = t / terms;
    const bool bias = j == terms - 1;
    const float* tap = xpad + (bias ? 0 : (j / (R * R)) * plane + (j / R % R) * pitch + j % R);
    float sum = 0.f;
    for (int oh = g; oh < s.covered_height(); oh += groups) {
      const float* gradient_row = gconv + oh * cw;
      const float* input_row = tap + oh * pitch;
      if (bias) {
        for (int ow = 0; ow < cw; ++ow) sum += gradient_row[ow];
      } else {
        for (int ow = 0; ow < cw; ++ow) sum = fmaf(gradient_row[ow], input_row[ow], sum);
      }
    }
    sums[t] = sum;
  }
}

// partial[n, k, j] <- the groups' sums of term j, added in group order.
MGPU_HOST_DEVICE inline void AddGroups(const ConvReluPoolShape& s, const float* sums, int n, int k, float* partial,
                                       int thread, int threads) {
  const int terms = s.terms();
  for (int j = thread; j < terms; j += threads) {
    float sum = 0.f;
    for (int g = 0; g < s.term_groups(); ++g) sum += sums[g * terms + j];
    partial[(int64_t{n} * s.out_channels + k) * terms + j] = sum;
  }
}

// Term j of filter k's gradient summed over the batch in sample order, from partial (N, K, terms).
MGPU_HOST_DEVICE inline float SumOverBatchAt(const ConvReluPoolShape& s, const float* partial, int k, int j) {
  float sum = 0.f;
  for (int n = 0; n < s.batch; ++n) sum += partial[(int64_t{n} * s.out_channels + k) * s.terms() + j];
  return sum;
}

// ---- backward, input: a block per (n, c) ----

// filters <- w[:, c] as (K, R, R).
MGPU_HOST_DEVICE inline void LoadChannelFilters(const ConvReluPoolShape& s, const float* w, int c, float* filters,
                                                int thread, int threads) {
  const int rr = s.kernel * s.kernel;
  Stage(s.channel_filters_floats(), thread, threads,
        [&](int i) { return w[(int64_t{i / rr} * s.in_channels + c) * rr + i % rr]; },
        [&](int i, float value) { filters[i] = value; });
}

// gx[n, c] <- sum over k, r, q of gconv[n, k, ih + P - r, iw + P - q] w[k, c, r, q]. Two pixels
// per element (s.pixel_pairs() of them), (ih, iw) and (ih, iw + half), half = ceil(W / 2), so that
// each tap loaded from the buffer serves two sums while a warp's threads read consecutive columns.
template <int kKernel>
MGPU_HOST_DEVICE inline void InputGradient(const ConvReluPoolShape& s, const float* gpad, const float* filters, int n,
                                           int c, float* gx, int thread, int threads) {
  const int R = FilterSize<kKernel>(s), pitch = s.gpad_pitch(), plane = s.gpad_height() * pitch;
  const int half = (s.width + 1) / 2;
  float* out = gx + (int64_t{n} * s.in_channels + c) * s.height * s.width;
  for (int i = thread; i < s.pixel_pairs(); i += threads) {
    const int ih = i / half, iw = i % half;
    const bool second = iw + half < s.width;  // an odd width's last column has no pair
    float left = 0.f, right = 0.f;
    for (int k = 0; k < s.out_channels; ++k) {
      const float* taps = filters + k * R * R;
      for (int r = 0; r < R; ++r) {
        const float* row = gpad + k * plane + (ih + R - 1 - r) * pitch + iw + R - 1;  // pixel iw reads row[-q]
        for (int q = 0; q < R; ++q) {
          const float tap = taps[r * R + q];
          left = fmaf(row[-q], tap, left);
          right = fmaf(second ? row[half - q] : 0.f, tap, right);
        }
      }
    }
    out[ih * s.width + iw] = left;
    if (second) out[ih * s.width + iw + half] = right;
  }
}

}  // namespace mgpu::kernels
