// --decode gpu's last step on the device (data/gpu_jpeg_batches.h): the crops of a chunk that
// nvJPEG decoded, resized into their places of the float batch.
//
// Each job (data/kernels/crop_resize_math.h) names a crop of `pixels` (the chunk's planar RGB
// images, uint8) and its batch position. Both functions write those positions of `batch`
// ((B, 3, side, side) float32, contiguous NCHW or contiguous channels-last, on the device of
// `pixels`) and no other: LibTorch's antialiased bilinear resize of the crop to side x side (a
// copy where the crop is that size already), rounded to whole 8-bit levels and clamped to
// [0, 255] as the CPU path stores pixels, mirrored left to right where job.flip, then normalized:
// level * scaling.scale[c] + scaling.shift[c], a multiplication and an addition as
// PixelNormalization's (the default keeps the levels). On the current stream. A job outside the
// pixels or the batch, or tensors of other shapes or layouts, throw c10::Error (the caller's bug,
// checked before any launch).
#pragma once

#include <array>
#include <vector>

#include <torch/torch.h>

#include "data/kernels/crop_resize_math.h"

namespace mgpu {

// Per channel: the stored value is level * scale[c] + shift[c].
struct LevelScaling {
  std::array<float, 3> scale{1, 1, 1};
  std::array<float, 3> shift{0, 0, 0};
};

// The kernel's view of `batch` ((B, 3, side, side)): its strides, and `scaling`.
kernels::BatchLayout BatchLayoutOf(const torch::Tensor& batch, const LevelScaling& scaling);

// On CUDA, one kernel launch for all the jobs where the build has nvcc (the jobs copied to the
// device through pinned memory); ResizeCropsByAten otherwise.
void ResizeCropsInto(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                     torch::Tensor& batch, const LevelScaling& scaling = {});

// The same by LibTorch's operations, a crop at a time (on the CPU too): what the kernel is held to.
void ResizeCropsByAten(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                       torch::Tensor& batch, const LevelScaling& scaling = {});

}  // namespace mgpu
