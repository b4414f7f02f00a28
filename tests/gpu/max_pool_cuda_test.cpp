// mgpu's max-pool (models/max_pool.h) on a GPU: ATen's CUDA max_pool2d bit for bit, forward and
// backward, and only where it applies. Skipped, saying so, on machines without a GPU.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include <torch/torch.h>

#include "models/fused_kernels.h"
#include "models/max_pool.h"

namespace mgpu {
namespace {

namespace nn = torch::nn;

class MaxPoolCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  }
};

torch::Tensor ChannelsLastOnCuda(const torch::Tensor& t) {
  return t.to(torch::kCUDA).contiguous(torch::MemoryFormat::ChannelsLast);
}

// MaxPool against the module's own forward (ATen's channels-last kernels): y and x's gradient.
void ExpectAtensBits(const torch::Tensor& x_host, const nn::MaxPool2dOptions& options) {
  SCOPED_TRACE(::testing::Message() << x_host.sizes() << " " << x_host.scalar_type() << " kernel "
                                    << options.kernel_size() << " stride " << options.stride() << " padding "
                                    << options.padding());
  nn::MaxPool2d pool(options);
  const torch::Tensor x = ChannelsLastOnCuda(x_host);
  ASSERT_TRUE(FusedMaxPoolApplies(x, *pool));
  const torch::Tensor ours_x = x.clone().requires_grad_(), aten_x = x.clone().requires_grad_();
  const torch::Tensor ours = MaxPool(ours_x, *pool), aten = pool->forward(aten_x);
  ASSERT_EQ(ours.sizes(), aten.sizes());
  EXPECT_TRUE(ours.is_contiguous(torch::MemoryFormat::ChannelsLast));
  const torch::Tensor gy = ChannelsLastOnCuda(torch::randn(aten.sizes()).to(x.scalar_type()));
  ours.backward(gy);
  aten.backward(gy);
  EXPECT_TRUE(torch::equal(ours.isnan(), aten.isnan()));
  EXPECT_TRUE(torch::equal(ours.nan_to_num(0), aten.nan_to_num(0)));
  EXPECT_TRUE(torch::equal(ours_x.grad(), aten_x.grad()))
      << (ours_x.grad().to(torch::kFloat) - aten_x.grad().to(torch::kFloat)).abs().max().item<float>() << " apart";
}

const nn::MaxPool2dOptions kResNetStem = nn::MaxPool2dOptions(3).stride(2).padding(1);
const nn::MaxPool2dOptions kVgg = nn::MaxPool2dOptions(2).stride(2);
const nn::MaxPool2dOptions kAlexNet = nn::MaxPool2dOptions(3).stride(2);

TEST_F(MaxPoolCuda, IsAtensForTheNetsPoolsInBothTypes) {
  torch::manual_seed(11);
  ExpectAtensBits(torch::randn({8, 64, 112, 112}).to(torch::kBFloat16), kResNetStem);  // ResNet-50's stem
  ExpectAtensBits(torch::randn({16, 128, 32, 32}).to(torch::kBFloat16), kVgg);
  ExpectAtensBits(torch::randn({4, 192, 27, 27}), kAlexNet);
  ExpectAtensBits(torch::randn({3, 24, 9, 11}), kResNetStem);
  ExpectAtensBits(torch::randn({2, 8, 7, 5}).to(torch::kBFloat16), kVgg);
}

// MaxPoolForked (ResNet's ImageNet stem): each consumer's gradient arrives on its own and the
// kernel adds them as it reads them; x's gradient is ATen's, where autograd adds them first. One
// consumer alone works too.
TEST_F(MaxPoolCuda, ForkedOutputTakesBothConsumersGradientsAsAtensAutogradWould) {
  torch::manual_seed(13);
  nn::MaxPool2d pool(kResNetStem);
  for (const auto dtype : {torch::kBFloat16, torch::kFloat}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const torch::Tensor x = ChannelsLastOnCuda(torch::randn({4, 64, 56, 56}).to(dtype));
    const torch::Tensor ours_x = x.clone().requires_grad_(), aten_x = x.clone().requires_grad_();
    const ForkedActivation ours = MaxPoolForked(ours_x, *pool);
    const torch::Tensor aten = pool->forward(aten_x);
    EXPECT_TRUE(torch::equal(ours.first, aten));
    EXPECT_EQ(ours.first.data_ptr(), ours.second.data_ptr()) << "one storage";
    const torch::Tensor gy = ChannelsLastOnCuda(torch::randn(aten.sizes()).to(dtype));
    const torch::Tensor gy2 = ChannelsLastOnCuda(torch::randn(aten.sizes()).to(dtype));
    torch::autograd::backward({ours.first, ours.second}, {gy, gy2});
    torch::autograd::backward({aten, aten}, {gy, gy2});
    EXPECT_TRUE(torch::equal(ours_x.grad(), aten_x.grad()));

    const torch::Tensor alone_x = x.clone().requires_grad_(), reference_x = x.clone().requires_grad_();
    MaxPoolForked(alone_x, *pool).second.backward(gy2);
    pool->forward(reference_x).backward(gy2);
    EXPECT_TRUE(torch::equal(alone_x.grad(), reference_x.grad())) << "the second consumer alone";
  }
}

TEST_F(MaxPoolCuda, IsAtensWithTiesAndNaNs) {
  torch::manual_seed(12);
  ExpectAtensBits(torch::randint(0, 3, {4, 64, 33, 33}).to(torch::kBFloat16), kResNetStem);
  torch::Tensor x = torch::randn({2, 16, 16, 16});
  x.index_put_({0, 0, 2, 2}, std::numeric_limits<float>::quiet_NaN());
  x.index_put_({1, 9, 5, 6}, std::numeric_limits<float>::quiet_NaN());
  x.index_put_({1, 9, 6, 6}, std::numeric_limits<float>::quiet_NaN());
  ExpectAtensBits(x, kResNetStem);
  ExpectAtensBits(x.to(torch::kBFloat16), kVgg);
}

TEST_F(MaxPoolCuda, LeavesNchwHalfOddChannelsAndOtherWindowsToAten) {
  nn::MaxPool2d pool(kResNetStem);
  const torch::Tensor x = ChannelsLastOnCuda(torch::randn({2, 16, 12, 12}));
  EXPECT_TRUE(FusedMaxPoolApplies(x, *pool));
  EXPECT_FALSE(FusedMaxPoolApplies(x.contiguous(), *pool));
  EXPECT_FALSE(FusedMaxPoolApplies(x.to(torch::kHalf), *pool));
  EXPECT_FALSE(FusedMaxPoolApplies(ChannelsLastOnCuda(torch::randn({2, 12, 12, 12})), *pool));
  EXPECT_FALSE(FusedMaxPoolApplies(x, *nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).ceil_mode(true))));
  EXPECT_FALSE(FusedMaxPoolApplies(x, *nn::MaxPool2d(nn::MaxPool2dOptions(3).dilation(2))));
  UseFusedKernels(false);
  EXPECT_FALSE(FusedMaxPoolApplies(x, *pool));
  UseFusedKernels(true);
  const torch::Tensor nchw = x.contiguous();
  EXPECT_TRUE(torch::equal(MaxPool(nchw, *pool), pool->forward(nchw)));
}

}  // namespace
}  // namespace mgpu
