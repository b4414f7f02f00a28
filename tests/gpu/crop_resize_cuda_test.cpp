// --decode gpu's crop resize on a GPU (data/crop_resize.h): the kernel against LibTorch's CUDA
// antialiased resize a crop at a time (the batches before the kernel) and against its own
// arithmetic run on the host, on the CPU test's cases (tests/support/crop_resize_cases.h), and
// from a chunk whose images start at odd offsets; it refuses jobs outside the pixels or the batch
// before any launch. Skipped, saying so, on machines without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "data/crop_resize.h"
#include "tests/support/crop_resize_cases.h"

namespace mgpu {
namespace {

class CropResizeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  }
};

TEST_F(CropResizeCuda, TheKernelIsAtensResizeAndItsOwnArithmetic) {
  const CropResizeCase c = StandardCropResizeCase();
  const torch::Tensor pixels = c.chunk.pixels.to(torch::kCUDA);
  torch::Tensor ours = c.EmptyBatch(torch::kCUDA), aten = c.EmptyBatch(torch::kCUDA);
  ResizeCropsInto(pixels, c.jobs, ours);
  ResizeCropsByAten(pixels, c.jobs, aten);
  ExpectWithinARoundingStep(ours.cpu(), aten.cpu());
  ExpectWithinARoundingStep(ours.cpu(), ResizeByPixels(c));
}

// Normalized into a channels-last batch: the levels as ATen's way stores them, and each value,
// where the levels agree, the host arithmetic's to the last bit (no fused multiply-add).
TEST_F(CropResizeCuda, StoresTheNormalizedLevelsAtChannelsLastStrides) {
  const CropResizeCase c = StandardCropResizeCase();
  const LevelScaling scaling = ImageNetScaling();
  const torch::Tensor pixels = c.chunk.pixels.to(torch::kCUDA);
  torch::Tensor ours = c.EmptyBatch(torch::kCUDA, torch::MemoryFormat::ChannelsLast);
  torch::Tensor aten = c.EmptyBatch(torch::kCUDA, torch::MemoryFormat::ChannelsLast);
  ResizeCropsInto(pixels, c.jobs, ours, scaling);
  ResizeCropsByAten(pixels, c.jobs, aten, scaling);
  ExpectWithinARoundingStep(LevelsOf(ours, scaling), LevelsOf(aten, scaling));
  const torch::Tensor host = ResizeByPixels(c, scaling, torch::MemoryFormat::ChannelsLast);
  const torch::Tensor same = LevelsOf(ours, scaling).eq(LevelsOf(host, scaling));
  ASSERT_GT(same.sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::equal(ours.cpu().contiguous().masked_select(same), host.contiguous().masked_select(same)));
}

TEST_F(CropResizeCuda, ReadsImagesAtOddOffsets) {
  const CropResizeCase c = StandardCropResizeCase();
  const int64_t shift = 5;  // the chunk's images no longer start aligned
  const torch::Tensor pixels = torch::cat({torch::zeros({shift}, torch::kUInt8), c.chunk.pixels}).to(torch::kCUDA);
  std::vector<kernels::CropResizeJob> shifted = c.jobs;
  for (kernels::CropResizeJob& job : shifted) job.offset += shift;
  torch::Tensor ours = c.EmptyBatch(torch::kCUDA);
  ResizeCropsInto(pixels, shifted, ours);
  ExpectWithinARoundingStep(ours.cpu(), ResizeByPixels(c));
}

TEST_F(CropResizeCuda, RefusesAJobOutsideThePixelsOrTheBatch) { ExpectRefusesJobsOutside(torch::kCUDA); }

}  // namespace
}  // namespace mgpu
