// Specification of --decode gpu's crop resize arithmetic (data/kernels/crop_resize_math.h), run on
// the CPU pixel by pixel: LibTorch's antialiased bilinear resize of each crop (ResizeCropsByAten,
// the way the batches were made before the kernel), rounded to whole levels and mirrored where
// asked, written into the crop's batch position and nowhere else, normalized, at the batch's strides. The GPU test
// (tests/gpu/crop_resize_cuda_test.cpp) holds the kernel to the same.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include <torch/torch.h>

#include "data/crop_resize.h"
#include "data/kernels/crop_resize_math.h"
#include "tests/support/crop_resize_cases.h"

namespace mgpu {
namespace {

TEST(CropResizeArithmetic, IsAtensAntialiasedBilinearRoundedAndMirrored) {
  const CropResizeCase c = StandardCropResizeCase();
  torch::Tensor aten = c.EmptyBatch(torch::kCPU);
  ResizeCropsByAten(c.chunk.pixels, c.jobs, aten);
  const torch::Tensor ours = ResizeByPixels(c);
  ExpectWithinARoundingStep(ours, aten);
  EXPECT_TRUE(aten[1].isnan().all().item<bool>() && aten[6].isnan().all().item<bool>()) << "positions no job names";
  const torch::Tensor side_crop = c.chunk.pixels.narrow(0, c.chunk.offset[2], 3 * 32 * 32).view({3, 32, 32});
  EXPECT_TRUE(torch::equal(ours[3], side_crop.flip({2}).to(torch::kFloat32)))
      << "a crop of the side is its pixels, mirrored";
}

// The levels normalized as PixelNormalization does (a multiplication, then an addition) and
// written at the batch's strides, NCHW or channels-last, by both ATen's way and the kernel's
// arithmetic, to the last bit.
TEST(CropResizeArithmetic, StoresTheNormalizedLevelsAtTheBatchsStrides) {
  const CropResizeCase c = StandardCropResizeCase();
  const LevelScaling scaling = ImageNetScaling();
  const torch::Tensor scale = PerChannel(scaling.scale), shift = PerChannel(scaling.shift);
  torch::Tensor levels = c.EmptyBatch(torch::kCPU);
  ResizeCropsByAten(c.chunk.pixels, c.jobs, levels);
  const torch::Tensor host_levels = ResizeByPixels(c);
  for (torch::MemoryFormat format : {torch::MemoryFormat::Contiguous, torch::MemoryFormat::ChannelsLast}) {
    torch::Tensor aten = c.EmptyBatch(torch::kCPU, format);
    ResizeCropsByAten(c.chunk.pixels, c.jobs, aten, scaling);
    ASSERT_TRUE(aten.is_contiguous(format));
    EXPECT_TRUE(torch::allclose(aten, levels.mul(scale).add_(shift), 0, 0, /*equal_nan=*/true)) << format;
    const torch::Tensor ours = ResizeByPixels(c, scaling, format);
    ASSERT_TRUE(ours.is_contiguous(format));
    EXPECT_TRUE(torch::allclose(ours, host_levels.mul(scale).add_(shift), 0, 0, /*equal_nan=*/true)) << format;
    ExpectWithinARoundingStep(LevelsOf(ours, scaling), levels);
  }
}

TEST(CropResizeArithmetic, RefusesAJobOutsideThePixelsOrTheBatch) { ExpectRefusesJobsOutside(torch::kCPU); }

TEST(CropResizeArithmetic, EachOutputsWeightsSpanTheCropAndSumToOne) {
  for (const auto& [in, out] : std::vector<std::pair<int32_t, int32_t>>{
           {500, 224}, {224, 224}, {17, 224}, {4000, 224}, {225, 224}, {1, 224}}) {
    for (int32_t i = 0; i < out; ++i) {
      const kernels::AxisTaps t = kernels::TapsFor(i, in, out);
      ASSERT_GE(t.first, 0);
      ASSERT_GE(t.count, 1) << in << " -> " << out << " at " << i;
      ASSERT_LE(t.first + t.count, in);
      double sum = 0;
      for (int32_t j = 0; j < t.count; ++j) sum += kernels::AxisWeight(t, j);
      EXPECT_NEAR(sum, 1.0, 1e-5) << in << " -> " << out << " at " << i;
    }
  }
}

TEST(CropResizeArithmetic, RoundsHalfToEvenAndClampsToEightBits) {
  EXPECT_EQ(kernels::RoundedLevel(2.5f), 2.0f);
  EXPECT_EQ(kernels::RoundedLevel(3.5f), 4.0f);
  EXPECT_EQ(kernels::RoundedLevel(-0.7f), 0.0f);
  EXPECT_EQ(kernels::RoundedLevel(255.6f), 255.0f);
  EXPECT_EQ(kernels::RoundedLevel(254.49f), 254.0f);
}

}  // namespace
}  // namespace mgpu
