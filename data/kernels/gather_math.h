// The arithmetic of --data-on-device's batch gather (gather_kernels.cu), which the CPU tests run
// item by item: the samples at a batch's indices, taken from the training set kept on the GPU as
// uint8 pixels, normalized as BatchLoader normalizes (pixel x scale, rounded, + shift, rounded:
// ATen's mul and add_, two roundings, no fused multiply-add) and written in the step's memory
// format, in one pass. ATen's way was four kernels (index_select, mul, add_, a strided channels-last
// copy); the three element-wise ones took 0.47 ms of ResNet-50's 44.6 ms step at 224 px on an H100,
// this kernel 0.1 ms (bench/results/2026-11-27-H100-gather-pool-fork/).
//
// Shapes: source (N, C, H, W) uint8, contiguous; indices (B) int64; scale and shift (C) float32;
// out (B, C, H, W) float32, contiguous in NCHW or in channels-last (NHWC in memory).
//
// Items: kGatherFloats consecutive floats of one sample's output (whichever channels and pixels
// they hold in its layout), so that a warp writes 512 contiguous bytes at once; their pixels are
// read through the cache. Positions within a sample are int32: C H W < 2^31 (GatherFits).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace mgpu::kernels {

constexpr int kGatherFloats = 4;  // 16 bytes: one vector store

struct GatherShape {
  int64_t samples = 0;  // N: images in the resident set
  int64_t batch = 0;    // B
  int32_t channels = 0;
  int32_t pixels = 0;   // H W
  bool channels_last = false;

  MGPU_HOST_DEVICE int32_t sample_floats() const { return channels * pixels; }
  MGPU_HOST_DEVICE int32_t items_per_sample() const { return (sample_floats() + kGatherFloats - 1) / kGatherFloats; }
};

// Whether the kernel takes a set of (N, C, H, W): a sample's floats within an int32.
inline bool GatherFits(int64_t channels, int64_t height, int64_t width) {
  return channels > 0 && height > 0 && width > 0 && channels * height * width < (int64_t{1} << 31) - kGatherFloats;
}

// pixel x scale + shift, rounded after each operation as ATen's two kernels round: nvcc would
// otherwise fuse them into one fused multiply-add (and so may a host compiler), which rounds once.
MGPU_HOST_DEVICE inline float NormalizedPixel(uint8_t pixel, float scale, float shift) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(__fmul_rn(static_cast<float>(pixel), scale), shift);
#else
  volatile float product = static_cast<float>(pixel) * scale;  // stored, so not contracted into the add
  return product + shift;
#endif
}

// The floats [first, first + count) of a sample's output, count = min(kGatherFloats, what is
// left), from `image`, the sample's (C, H, W) pixels; first is item x kGatherFloats.
struct GatherItemValues {
  float values[kGatherFloats];
  int count;
};

MGPU_HOST_DEVICE inline GatherItemValues GatherItem(const GatherShape& s, int32_t first, const uint8_t* image,
                                                    const float* scale, const float* shift) {
  GatherItemValues out{};
  out.count = s.sample_floats() - first < kGatherFloats ? s.sample_floats() - first : kGatherFloats;
  // (channel, pixel) of the first float, then stepped along the layout: one division per item.
  int32_t channel = s.channels_last ? first % s.channels : first / s.pixels;
  int32_t pixel = s.channels_last ? first / s.channels : first % s.pixels;
  MGPU_UNROLL
  for (int u = 0; u < kGatherFloats; ++u) {
    if (u < out.count) out.values[u] = NormalizedPixel(image[channel * s.pixels + pixel], scale[channel], shift[channel]);
    if (s.channels_last) {
      if (++channel == s.channels) channel = 0, ++pixel;
    } else if (++pixel == s.pixels) {
      pixel = 0, ++channel;
    }
  }
  return out;
}

}  // namespace mgpu::kernels
