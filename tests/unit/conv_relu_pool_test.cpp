// Specification of the fused convolution stage's arithmetic (models/kernels/conv_relu_pool_math.h),
// run on the CPU as the CUDA kernels run it: the output, the pooling's choices and all three
// gradients of ATen's max_pool2d(relu(conv2d(x, w, b, padding)), 2), computed in double.
#include <gtest/gtest.h>

#include <cmath>

#include "models/conv_relu_pool.h"
#include "tests/support/conv_relu_pool_on_host.h"

namespace mgpu {
namespace {

using testing::HostConvReluPool;
using testing::RunConvReluPoolOnHost;

struct Stage {
  torch::Tensor x, w, b, gy;
  int padding;
};

// A random stage: x (N, C, H, W), K filters of R x R, and an upstream gradient for its output.
Stage RandomStage(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int padding) {
  torch::manual_seed(11);
  Stage s{torch::randn({n, c, h, w}), torch::randn({k, c, r, r}) / (r * std::sqrt(double(c))), torch::randn({k}) * 0.1,
          torch::Tensor(), padding};
  const int64_t pooled_h = (h + 2 * padding - r + 1) / 2, pooled_w = (w + 2 * padding - r + 1) / 2;
  s.gy = torch::randn({n, k, pooled_h, pooled_w});
  return s;
}

// ATen's stage in double: output, the flat index into each conv plane its pooling took, gradients.
struct AtenStage {
  torch::Tensor y, taken, gx, gw, gb;
};

AtenStage RunAten(const Stage& s) {
  const auto x = s.x.to(torch::kDouble).requires_grad_(), w = s.w.to(torch::kDouble).requires_grad_();
  const auto b = s.b.to(torch::kDouble).requires_grad_();
  const auto conv = torch::relu(torch::conv2d(x, w, b, /*stride=*/1, /*padding=*/s.padding));
  auto [y, taken] = torch::max_pool2d_with_indices(conv, {2, 2});
  (y * s.gy.to(torch::kDouble)).sum().backward();
  return {y.detach(), taken, x.grad(), w.grad(), b.grad()};
}

// The window position (0..3, row-major) of ATen's flat index into a conv plane of width `conv_w`.
torch::Tensor WindowOf(const torch::Tensor& taken, int64_t conv_w) {
  return ((taken.div(conv_w, "floor") % 2) * 2 + taken % conv_w % 2).to(torch::kUInt8);
}

void ExpectAtensStage(const Stage& s, const HostConvReluPool& ours) {
  const AtenStage aten = RunAten(s);
  const int64_t conv_w = s.x.size(3) + 2 * s.padding - s.w.size(2) + 1;
  EXPECT_TRUE(torch::allclose(ours.y.to(torch::kDouble), aten.y, 1e-5, 1e-5));
  EXPECT_TRUE(torch::equal(ours.window, WindowOf(aten.taken, conv_w)));
  EXPECT_TRUE(torch::allclose(ours.gx.to(torch::kDouble), aten.gx, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(ours.gw.to(torch::kDouble), aten.gw, 1e-4, 1e-4)) << ours.gw - aten.gw;
  EXPECT_TRUE(torch::allclose(ours.gb.to(torch::kDouble), aten.gb, 1e-4, 1e-4)) << ours.gb - aten.gb;
}

TEST(ConvReluPoolArithmetic, IsAtensStageOnLeNetsFirstConvolution) {
  const Stage s = RandomStage(4, 1, 28, 28, 6, 5, 2);
  ExpectAtensStage(s, RunConvReluPoolOnHost<5>(s.x, s.w, s.b, s.padding, s.gy));
}

TEST(ConvReluPoolArithmetic, IsAtensStageOnLeNetsSecondConvolution) {
  const Stage s = RandomStage(4, 6, 14, 14, 16, 5, 0);
  ExpectAtensStage(s, RunConvReluPoolOnHost<5>(s.x, s.w, s.b, s.padding, s.gy));
}

TEST(ConvReluPoolArithmetic, TakesAnyFilterSizeAndDropsAnOddLastRowAndColumnAsPoolingDoes) {
  const Stage s = RandomStage(3, 2, 10, 12, 4, 3, 1);  // conv 10 x 12, pooled 5 x 6
  ExpectAtensStage(s, RunConvReluPoolOnHost<0>(s.x, s.w, s.b, s.padding, s.gy));
  const Stage odd = RandomStage(3, 2, 9, 11, 4, 3, 1);  // conv 9 x 11, pooled 4 x 5
  ExpectAtensStage(odd, RunConvReluPoolOnHost<0>(odd.x, odd.w, odd.b, odd.padding, odd.gy));
}

TEST(ConvReluPoolArithmetic, TheSizeSpecificPathComputesTheSameBitsAsTheGeneralOne) {
  const Stage s = RandomStage(2, 3, 12, 12, 5, 5, 2);
  const auto fixed = RunConvReluPoolOnHost<5>(s.x, s.w, s.b, s.padding, s.gy);
  const auto general = RunConvReluPoolOnHost<0>(s.x, s.w, s.b, s.padding, s.gy);
  for (const auto& [a, b] : {std::pair{fixed.y, general.y}, {fixed.gx, general.gx}, {fixed.gw, general.gw},
                             {fixed.gb, general.gb}}) {
    EXPECT_TRUE(torch::equal(a, b));
  }
}

TEST(ConvReluPoolArithmetic, AClosedReluPassesNoGradientAndPoolsToTheWindowsFirstZero) {
  Stage s = RandomStage(2, 1, 8, 8, 3, 5, 2);
  s.b.fill_(-100.f);  // every pre-activation negative
  const auto ours = RunConvReluPoolOnHost<5>(s.x, s.w, s.b, s.padding, s.gy);
  EXPECT_TRUE(torch::equal(ours.y, torch::zeros_like(ours.y)));
  EXPECT_TRUE(torch::equal(ours.window, torch::zeros_like(ours.window))) << "ATen's max_pool2d keeps the first";
  EXPECT_TRUE(torch::equal(ours.gx, torch::zeros_like(ours.gx)));
  EXPECT_TRUE(torch::equal(ours.gw, torch::zeros_like(ours.gw)));
  EXPECT_TRUE(torch::equal(ours.gb, torch::zeros_like(ours.gb)));
  ExpectAtensStage(s, ours);
}

TEST(ConvReluPoolArithmetic, ANanInTheInputReachesTheOutputsItFeedsAsInAten) {
  Stage s = RandomStage(1, 1, 8, 8, 2, 5, 2);
  s.x[0][0][3][3] = NAN;
  const auto ours = RunConvReluPoolOnHost<5>(s.x, s.w, s.b, s.padding, s.gy);
  const auto aten = torch::max_pool2d(torch::relu(torch::conv2d(s.x, s.w, s.b, 1, s.padding)), {2, 2});
  EXPECT_TRUE(torch::equal(ours.y.isnan(), aten.isnan()));
  EXPECT_GT(ours.y.isnan().sum().item<int64_t>(), 0);
}

TEST(ConvReluPool, LeavesTheCpuToAten) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(1, 6, 5).padding(2));
  EXPECT_FALSE(FusedConvReluPoolApplies(torch::zeros({2, 1, 28, 28}), *conv));
}

TEST(ConvReluPoolArithmetic, TakesShapesWhoseBlocksFitSharedMemoryAndPaddingAtMostTheFilterLessOne) {
  EXPECT_TRUE(kernels::FitsTheKernels(kernels::MakeConvReluPoolShape(32, 1, 28, 28, 6, 5, 2)));
  EXPECT_TRUE(kernels::FitsTheKernels(kernels::MakeConvReluPoolShape(32, 6, 14, 14, 16, 5, 0)));
  EXPECT_FALSE(kernels::FitsTheKernels(kernels::MakeConvReluPoolShape(32, 1, 28, 28, 6, 5, 5))) << "padding > R - 1";
  EXPECT_FALSE(kernels::FitsTheKernels(kernels::MakeConvReluPoolShape(32, 64, 64, 64, 64, 3, 1))) << "256 KiB per block";
  EXPECT_FALSE(kernels::FitsTheKernels(kernels::MakeConvReluPoolShape(32, 1, 4, 4, 6, 5, 0))) << "no pooled output";
}

}  // namespace
}  // namespace mgpu
