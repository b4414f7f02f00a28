// The arithmetic of mgpu's max-pool over a channels-last activation: ATen's max_pool2d and its
// backward for a window without dilation, as the items of its CUDA kernels (max_pool_kernels.cu),
// which the CPU tests run item by item. ATen's channels-last kernels took 2.7 ms of ResNet-50's
// 49 ms step on an H100 (their int64 indices are as large as the pool's input, and the backward
// reads them strided); these move the bytes the pool needs and no more.
//
// Shapes: x (N, C, H, W) and y (N, C, OH, OW), channels-last, so rows of C channels, in bfloat16
// (Bf16) or float32, C a multiple of kVector, 16-byte aligned. The forward records, per element of
// y, where in its window the max was: the window's index dh kernel_w + dw, one byte (kernel_h
// kernel_w <= 256), where ATen keeps an int64 index into the image.
//
// Semantics are ATen's: a window's max is its first element greater than every one before it, in
// order of (h, w), or its last NaN (a NaN propagates); a window with nothing above -inf points at its
// first element (ATen's NCHW and CPU kernels do too; its channels-last kernel points at the
// image's first pixel). The backward's gx at an element is the sum, in float32 and in order of
// (oh, ow), of gy over the windows whose max it was, rounded once: ATen's order, so ATen's bits.
//
// Items: the forward's are (output pixel, vector of kVector channels), the backward's (input pixel,
// vector), each written by one item: no atomics, the same bits every run.
#pragma once

#include "models/kernels/vector_elements.h"

namespace mgpu::kernels {

struct MaxPoolShape {
  int batch = 0, channels = 0, height = 0, width = 0;  // x
  int pooled_height = 0, pooled_width = 0;              // y
  int kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0, pad_h = 0, pad_w = 0;

  MGPU_HOST_DEVICE int vectors() const { return channels / kVector; }
  MGPU_HOST_DEVICE int64_t forward_items() const { return int64_t{batch} * pooled_height * pooled_width * vectors(); }
  MGPU_HOST_DEVICE int64_t backward_items() const { return int64_t{batch} * height * width * vectors(); }
};

// ATen's output side for a window without dilation or ceil mode; 0 where no window fits (where
// ATen refuses the shape).
inline int MaxPoolOutputSide(int size, int kernel, int stride, int pad) {
  return size + 2 * pad < kernel ? 0 : (size + 2 * pad - kernel) / stride + 1;
}

// Whether the kernels take the shape: ATen's own conditions (a padding of at most half the window,
// an output pixel at least), a window index within a byte, whole vectors of channels, and pixels
// (N H W and N OH OW, which padding may make the larger) within an int.
inline bool FitsTheMaxPoolKernels(const MaxPoolShape& s) {
  const bool window = s.kernel_h > 0 && s.kernel_w > 0 && s.kernel_h * s.kernel_w <= 256 && s.stride_h > 0 &&
                      s.stride_w > 0 && s.pad_h >= 0 && s.pad_w >= 0 && 2 * s.pad_h <= s.kernel_h &&
                      2 * s.pad_w <= s.kernel_w;
  return window && s.batch > 0 && s.channels > 0 && s.channels % kVector == 0 && s.pooled_height > 0 &&
         s.pooled_width > 0 && int64_t{s.batch} * s.height * s.width < (int64_t{1} << 31) &&
         int64_t{s.batch} * s.pooled_height * s.pooled_width < (int64_t{1} << 31);
}

// The output pixel of a forward item, or the input pixel of a backward one.
struct PoolPixel {
  int n, h, w, vector;
};

MGPU_HOST_DEVICE inline PoolPixel PixelOf(int64_t item, int vectors, int height, int width) {
  const int vector = static_cast<int>(item % vectors);
  int pixel = static_cast<int>(item / vectors);
  const int w = pixel % width;
  pixel /= width;
  return {pixel / height, pixel % height, w, vector};
}

// The item's kVector window indices at `where` (8 bytes), as one 8-byte access on the GPU.
MGPU_HOST_DEVICE inline void StoreWindowIndices(const uint8_t* indices, uint8_t* where) {
#ifdef __CUDA_ARCH__
  uint2 packed;
  packed.x = indices[0] | indices[1] << 8 | indices[2] << 16 | uint32_t{indices[3]} << 24;
  packed.y = indices[4] | indices[5] << 8 | indices[6] << 16 | uint32_t{indices[7]} << 24;
  *reinterpret_cast<uint2*>(where) = packed;
#else
  for (int i = 0; i < kVector; ++i) where[i] = indices[i];
#endif
}

MGPU_HOST_DEVICE inline void LoadWindowIndices(const uint8_t* where, uint8_t* indices) {
#ifdef __CUDA_ARCH__
  const uint2 packed = *reinterpret_cast<const uint2*>(where);
  MGPU_UNROLL
  for (int i = 0; i < 4; ++i) indices[i] = packed.x >> 8 * i & 0xff, indices[4 + i] = packed.y >> 8 * i & 0xff;
#else
  for (int i = 0; i < kVector; ++i) indices[i] = where[i];
#endif
}

// y and the window indices of one output pixel's vector of channels.
template <typename T>
MGPU_HOST_DEVICE inline void MaxPoolForwardItem(const MaxPoolShape& s, int64_t item, const T* x, T* y,
                                                uint8_t* window_index) {
  const PoolPixel out = PixelOf(item, s.vectors(), s.pooled_height, s.pooled_width);
  const int h0 = out.h * s.stride_h - s.pad_h, w0 = out.w * s.stride_w - s.pad_w;
  const int h_begin = h0 > 0 ? h0 : 0, h_end = h0 + s.kernel_h < s.height ? h0 + s.kernel_h : s.height;
  const int w_begin = w0 > 0 ? w0 : 0, w_end = w0 + s.kernel_w < s.width ? w0 + s.kernel_w : s.width;
  float best[kVector];
  uint8_t where[kVector];
  MGPU_UNROLL
  for (int i = 0; i < kVector; ++i) {
    best[i] = BitsToFloat(0xff800000u);  // -inf
    where[i] = static_cast<uint8_t>((h_begin - h0) * s.kernel_w + (w_begin - w0));
  }
  for (int h = h_begin; h < h_end; ++h) {
    for (int w = w_begin; w < w_end; ++w) {
      float value[kVector];
      LoadVector(x + ((int64_t{out.n} * s.height + h) * s.width + w) * s.channels + out.vector * kVector, value);
      const auto here = static_cast<uint8_t>((h - h0) * s.kernel_w + (w - w0));
      MGPU_UNROLL
      for (int i = 0; i < kVector; ++i) {
        if (value[i] > best[i] || value[i] != value[i]) best[i] = value[i], where[i] = here;
      }
    }
  }
  StoreVector(best, y + item * kVector);
  StoreWindowIndices(where, window_index + item * kVector);
}

// The output pixels [begin, end) whose windows cover input pixel `i` (ATen's p_start and p_end).
MGPU_HOST_DEVICE inline int FirstWindowOver(int i, int pad, int kernel, int stride) {
  return i + pad < kernel ? 0 : (i + pad - kernel) / stride + 1;
}
MGPU_HOST_DEVICE inline int EndOfWindowsOver(int i, int pad, int stride, int pooled) {
  const int end = (i + pad) / stride + 1;
  return end < pooled ? end : pooled;
}

// gx of one input pixel's vector of channels, from gy and the forward's window indices. gy2: a
// second consumer's gradient of y (a forked output, ForkedActivation), added to gy as it is read and
// rounded to T, as ATen's autograd engine would add the two in a pass of its own; or null.
template <typename T>
MGPU_HOST_DEVICE inline void MaxPoolBackwardItem(const MaxPoolShape& s, int64_t item, const T* gy, const T* gy2,
                                                 const uint8_t* window_index, T* gx) {
  const PoolPixel in = PixelOf(item, s.vectors(), s.height, s.width);
  const int oh_end = EndOfWindowsOver(in.h, s.pad_h, s.stride_h, s.pooled_height);
  const int ow_begin = FirstWindowOver(in.w, s.pad_w, s.kernel_w, s.stride_w);
  const int ow_end = EndOfWindowsOver(in.w, s.pad_w, s.stride_w, s.pooled_width);
  float sum[kVector] = {};
  for (int oh = FirstWindowOver(in.h, s.pad_h, s.kernel_h, s.stride_h); oh < oh_end; ++oh) {
    for (int ow = ow_begin; ow < ow_end; ++ow) {
      const int64_t out = ((int64_t{in.n} * s.pooled_height + oh) * s.pooled_width + ow) * s.vectors() + in.vector;
      const int here = (in.h - (oh * s.stride_h - s.pad_h)) * s.kernel_w + (in.w - (ow * s.stride_w - s.pad_w));
      uint8_t where[kVector];
      LoadWindowIndices(window_index + out * kVector, where);
      bool any = false;
      MGPU_UNROLL
      for (int i = 0; i < kVector; ++i) any = any || where[i] == here;
      if (!any) continue;  // gy need not be read
      float g[kVector];
      LoadVector(gy + out * kVector, g);
      if (gy2 != nullptr) {
        float g2[kVector];
        LoadVector(gy2 + out * kVector, g2);
        MGPU_UNROLL
        for (int i = 0; i < kVector; ++i) g[i] = RoundedTo<T>(g[i] + g2[i]);
      }
      MGPU_UNROLL
      for (int i = 0; i < kVector; ++i) {
        if (where[i] == here) sum[i] += g[i];
      }
    }
  }
  StoreVector(sum, gx + item * kVector);
}

}  // namespace mgpu::kernels
