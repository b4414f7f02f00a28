// The arithmetic of --decode gpu's crop resize (crop_resize_kernels.cu), which the CPU tests run
// pixel by pixel: each crop of a chunk that nvJPEG decoded (planar RGB, uint8) resized to the
// batch's side by LibTorch's antialiased bilinear filter (ATen's upsample_antialias weights: a
// triangle filter widened by the scale when shrinking, normalized per output pixel, rows first),
// rounded to whole 8-bit levels and clamped (as the CPU path stores pixels), mirrored where the
// crop plan flips, and written into its place in the float batch. ATen's way took, per image, a
// resize kernel plus a chunk-wide float copy, then a batch-wide rounding and a gather for the
// flips: about 256 launches a batch, enqueued by the thread that also makes nvJPEG's blocking
// calls. This is one launch per chunk.
//
// Shapes: pixels (total) uint8, each source image 3 planes of height x width bytes from `offset`;
// the batch (B, 3, side, side) float32, its strides in a BatchLayout (contiguous NCHW, or
// channels-last: the model's layout, so that the step does not copy the batch into it).
#pragma once

#include <cstdint>

#include "common/host_device.h"

#ifndef __CUDACC__
#include <cmath>
#endif

namespace mgpu::kernels {

// One crop to resize: where its source planes lie, the crop within them, where it goes.
struct CropResizeJob {
  int64_t offset = 0;  // of the source's first plane in the chunk's pixels
  int32_t height = 0;  // of each source plane (its rows are `width` bytes apart)
  int32_t width = 0;
  int32_t top = 0;  // the crop, within the planes
  int32_t left = 0;
  int32_t crop_height = 0;
  int32_t crop_width = 0;
  int32_t position = 0;  // in the batch
  int32_t flip = 0;      // 1: mirrored left to right
};

// How the batch stores a resized pixel's channel c: at its strides (elements), as
// level * scale[c] + shift[c] (the data set's normalization, as PixelNormalization applies it:
// a multiplication, then an addition, each rounded; scale 1 and shift 0 keep the levels).
struct BatchLayout {
  int64_t stride[4] = {0, 0, 0, 0};  // of (B, 3, side, side)
  float scale[3] = {1, 1, 1};
  float shift[3] = {0, 0, 0};
};

// The taps of one output index along one axis: source indices [first, first + count) of the
// crop, with ATen's weights (AxisWeight), in ATen's float arithmetic so that the sums match its
// kernel's to the last bits where the compilers contract alike.
struct AxisTaps {
  int32_t first = 0;
  int32_t count = 0;
  float first_minus_center = 0;
  float inverse_scale = 1;
  float total = 0;  // of the unnormalized weights
};

MGPU_HOST_DEVICE inline float TriangleFilter(float x) {
  if (x < 0) x = -x;
  return x < 1 ? 1 - x : 0;
}

MGPU_HOST_DEVICE inline float UnnormalizedWeight(const AxisTaps& t, int32_t j) {
  return TriangleFilter((static_cast<float>(j) + t.first_minus_center + 0.5f) * t.inverse_scale);
}

// ATen's _compute_weights_span and _compute_weights' total for output index `i` of `out_size`
// from `in_size` (scale in / out, support the scale when shrinking, else 1).
MGPU_HOST_DEVICE inline AxisTaps TapsFor(int32_t i, int32_t in_size, int32_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  const float support = scale >= 1.0f ? scale : 1.0f;
  const float center = scale * (static_cast<float>(i) + 0.5f);
  AxisTaps t;
  const int32_t first = static_cast<int32_t>(center - support + 0.5f);
  const int32_t end = static_cast<int32_t>(center + support + 0.5f);
  t.first = first > 0 ? first : 0;
  t.count = (end < in_size ? end : in_size) - t.first;
  t.first_minus_center = static_cast<float>(t.first) - center;
  t.inverse_scale = scale >= 1.0f ? static_cast<float>(1.0 / static_cast<double>(scale)) : 1.0f;
  for (int32_t j = 0; j < t.count; ++j) t.total += UnnormalizedWeight(t, j);
  return t;
}

MGPU_HOST_DEVICE inline float AxisWeight(const AxisTaps& t, int32_t j) {
  const float w = UnnormalizedWeight(t, j);
  return t.total != 0 ? w / t.total : w;
}

MGPU_HOST_DEVICE inline float RoundedLevel(float v) {
#ifdef __CUDA_ARCH__
  v = rintf(v);  // half to even, as ATen's round_
#else
  v = std::nearbyint(v);
#endif
  return v < 0 ? 0 : (v > 255 ? 255 : v);
}

// Output pixel (y, x) of `job`'s crop resized to side x side, its three channels; `pixels` is
// the chunk's buffer.
MGPU_HOST_DEVICE inline void ResizedPixel(const CropResizeJob& job, const uint8_t* pixels, int32_t side, int32_t y,
                                          int32_t x, float out[3]) {
  const AxisTaps ty = TapsFor(y, job.crop_height, side);
  const AxisTaps tx = TapsFor(x, job.crop_width, side);
  const int64_t plane = static_cast<int64_t>(job.height) * job.width;
  float sum[3] = {0, 0, 0};
  for (int32_t i = 0; i < ty.count; ++i) {
    const uint8_t* row = pixels + job.offset + static_cast<int64_t>(job.top + ty.first + i) * job.width + job.left +
                         tx.first;
    float line[3] = {0, 0, 0};
    for (int32_t j = 0; j < tx.count; ++j) {
      const float w = AxisWeight(tx, j);
      MGPU_UNROLL
      for (int c = 0; c < 3; ++c) line[c] += static_cast<float>(row[c * plane + j]) * w;
    }
    const float w = AxisWeight(ty, i);
    MGPU_UNROLL
    for (int c = 0; c < 3; ++c) sum[c] += line[c] * w;
  }
  MGPU_UNROLL
  for (int c = 0; c < 3; ++c) out[c] = RoundedLevel(sum[c]);
}

// Where channel c of output pixel (y, x) of `job` goes in the batch, mirrored if job.flip.
MGPU_HOST_DEVICE inline int64_t BatchIndex(const CropResizeJob& job, const BatchLayout& layout, int32_t side, int c,
                                           int32_t y, int32_t x) {
  const int32_t column = job.flip ? side - 1 - x : x;
  return job.position * layout.stride[0] + c * layout.stride[1] + y * layout.stride[2] + column * layout.stride[3];
}

// What the batch stores for `level` in channel c: two roundings, never contracted into one
// (nvcc would fuse them), so that the values are those of a multiplication and an addition.
MGPU_HOST_DEVICE inline float StoredValue(const BatchLayout& layout, int c, float level) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(__fmul_rn(level, layout.scale[c]), layout.shift[c]);
#else
  const float product = level * layout.scale[c];
  return product + layout.shift[c];
#endif
}

}  // namespace mgpu::kernels
