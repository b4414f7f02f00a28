// The cases of --decode gpu's crop resize specification (data/crop_resize.h): a chunk of planar
// RGB images as nvJPEG lays them out, crops of it that shrink, enlarge, copy and mirror, and the
// host run of the kernel's arithmetic, and the jobs it must refuse. The CPU test and the GPU test
// run them alike.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "data/crop_resize.h"
#include "data/kernels/crop_resize_math.h"

namespace mgpu {

// Source images of the given (height, width) laid out as nvJPEG's chunks are: planar RGB, one
// after the other. The pixels are smooth ramps with noise, so that a resize's weights show.
struct CropResizeChunk {
  torch::Tensor pixels;         // (total) uint8
  std::vector<int64_t> offset;  // of each image
  std::vector<std::pair<int32_t, int32_t>> size;
};

inline CropResizeChunk MakeCropResizeChunk(const std::vector<std::pair<int32_t, int32_t>>& sizes) {
  torch::manual_seed(11);
  CropResizeChunk chunk;
  std::vector<torch::Tensor> planes;
  int64_t offset = 0;
  for (const auto& [h, w] : sizes) {
    const torch::Tensor y = torch::linspace(0, 180, h).view({1, h, 1});
    const torch::Tensor x = torch::linspace(0, 60, w).view({1, 1, w});
    const torch::Tensor image = (y + x + torch::randint(0, 16, {3, h, w}).to(torch::kFloat32)).clamp(0, 255);
    planes.push_back(image.to(torch::kUInt8).reshape({-1}));
    chunk.offset.push_back(offset);
    chunk.size.emplace_back(h, w);
    offset += 3 * int64_t{h} * w;
  }
  chunk.pixels = torch::cat(planes);
  return chunk;
}

inline kernels::CropResizeJob CropJob(const CropResizeChunk& chunk, size_t image, int32_t top, int32_t left,
                                      int32_t crop_height, int32_t crop_width, int32_t position, bool flip) {
  return kernels::CropResizeJob{chunk.offset[image], chunk.size[image].first, chunk.size[image].second, top, left,
                                crop_height, crop_width, position, flip ? 1 : 0};
}

// Five crops of four images into a batch of 7 (positions 1 and 6 named by no job), side 32.
struct CropResizeCase {
  CropResizeChunk chunk;
  std::vector<kernels::CropResizeJob> jobs;
  int64_t batch = 7;
  int32_t side = 32;

  torch::Tensor EmptyBatch(torch::Device device, torch::MemoryFormat format = torch::MemoryFormat::Contiguous) const {
    return torch::full({batch, 3, side, side}, std::numeric_limits<float>::quiet_NaN(), torch::TensorOptions(device))
        .contiguous(format);
  }
};

inline CropResizeCase StandardCropResizeCase() {
  CropResizeCase c;
  c.chunk = MakeCropResizeChunk({{333, 500}, {48, 40}, {32, 32}, {1200, 97}});
  c.jobs = {
      CropJob(c.chunk, 0, 17, 41, 290, 401, 0, false),  // shrunk about 9x and 12x: wide filters
      CropJob(c.chunk, 0, 0, 0, 333, 500, 5, true),     // the whole image, mirrored
      CropJob(c.chunk, 1, 20, 23, 28, 17, 2, false),    // to the planes' bottom-right corner, enlarged
      CropJob(c.chunk, 2, 0, 0, 32, 32, 3, true),       // already the side: copied, mirrored
      CropJob(c.chunk, 3, 100, 3, 1000, 90, 4, false),  // shrunk 31x down, 3x across
  };
  return c;
}

// A normalization of the kind data sets have (ImageNet's mean and stddev on the 8-bit scale).
inline LevelScaling ImageNetScaling() {
  const std::array<float, 3> mean{0.485f, 0.456f, 0.406f}, stddev{0.229f, 0.224f, 0.225f};
  LevelScaling scaling;
  for (size_t c = 0; c < 3; ++c) {
    scaling.scale[c] = 1.0f / (255.0f * stddev[c]);
    scaling.shift[c] = -mean[c] / stddev[c];
  }
  return scaling;
}

// The host run of every output pixel of every job, as the kernel runs them, into a batch of
// `format`, scaled by `scaling`.
inline torch::Tensor ResizeByPixels(const CropResizeCase& c, const LevelScaling& scaling = {},
                                    torch::MemoryFormat format = torch::MemoryFormat::Contiguous) {
  torch::Tensor out = c.EmptyBatch(torch::kCPU, format);
  const kernels::BatchLayout layout = BatchLayoutOf(out, scaling);
  for (const kernels::CropResizeJob& job : c.jobs) {
    for (int32_t y = 0; y < c.side; ++y) {
      for (int32_t x = 0; x < c.side; ++x) {
        float values[3];
        kernels::ResizedPixel(job, c.chunk.pixels.data_ptr<uint8_t>(), c.side, y, x, values);
        for (int k = 0; k < 3; ++k) {
          out.data_ptr<float>()[kernels::BatchIndex(job, layout, c.side, k, y, x)] =
              kernels::StoredValue(layout, k, values[k]);
        }
      }
    }
  }
  return out;
}

// Per-channel values as a (1, 3, 1, 1) CPU tensor, to broadcast over a batch.
inline torch::Tensor PerChannel(const std::array<float, 3>& values) {
  return torch::tensor(std::vector<float>(values.begin(), values.end())).view({1, 3, 1, 1});
}

// The 8-bit levels a batch scaled by `scaling` stores, recovered (exactly: the scaling's rounding
// errors are far below half a level), in NCHW.
inline torch::Tensor LevelsOf(const torch::Tensor& batch, const LevelScaling& scaling) {
  return ((batch.cpu() - PerChannel(scaling.shift)) / PerChannel(scaling.scale)).round().contiguous();
}

// The same positions written (the named ones, wholly), and their values whole levels apart at
// most 1, that only where two float sums straddle a rounding boundary: a handful in a thousand.
inline void ExpectWithinARoundingStep(const torch::Tensor& ours, const torch::Tensor& reference) {
  const torch::Tensor written = ~reference.isnan();
  EXPECT_TRUE(torch::equal(written, ~ours.isnan())) << "other positions written, or named ones left";
  const torch::Tensor difference = (ours - reference).abs().masked_select(written);
  ASSERT_GT(difference.numel(), 0);
  EXPECT_LE(difference.max().item<float>(), 1.0f);
  EXPECT_LE(difference.gt(0).sum().item<int64_t>(), difference.numel() / 200) << "values off by one";
}

// ResizeCropsInto on `device` refuses, before writing anything, a job whose crop leaves its
// planes, whose image leaves the chunk, or whose position leaves the batch.
inline void ExpectRefusesJobsOutside(torch::Device device) {
  const CropResizeCase c = StandardCropResizeCase();
  const torch::Tensor pixels = c.chunk.pixels.to(device);
  torch::Tensor batch = c.EmptyBatch(device);
  const kernels::CropResizeJob inside = c.jobs[2];  // image 1, 48 x 40: its bottom-right corner
  for (auto change : std::vector<void (*)(kernels::CropResizeJob&)>{
           [](kernels::CropResizeJob& j) { j.crop_height += 1; },  // one row below the planes
           [](kernels::CropResizeJob& j) { j.left = -1; },
           [](kernels::CropResizeJob& j) { j.crop_width = 0; },
           [](kernels::CropResizeJob& j) { j.position = 7; },         // the batch holds 7
           [](kernels::CropResizeJob& j) { j.offset = 1 << 30; }}) {  // past the chunk
    kernels::CropResizeJob outside = inside;
    change(outside);
    EXPECT_THROW(ResizeCropsInto(pixels, {outside}, batch), c10::Error);
  }
  EXPECT_TRUE(batch.isnan().all().item<bool>()) << "nothing written before the check";
  EXPECT_NO_THROW(ResizeCropsInto(pixels, {inside}, batch));
}

}  // namespace mgpu
