// Specification of --decode gpu's crop resize arithmetic (data/kernels/crop_resize_math.h), run on
// the CPU pixel by pixel: LibTorch's antialiased bilinear resize of each crop (ResizeCropsByAten,
// the way the batches were made before the kernel), rounded to whole levels and mirrored where
// asked, written into the crop's batch position and nowhere else. The GPU test
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
