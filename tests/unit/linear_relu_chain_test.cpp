// Specification of the fused fully connected head's arithmetic (models/kernels/linear_chain_math.h),
// run on the CPU as the CUDA kernels run it: the output and every gradient of ATen's
// layers[M-1](relu(... relu(layers[0](x)) ...)), computed in double.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "models/linear_relu_chain.h"
#include "tests/support/linear_chain_on_host.h"

namespace mgpu {
namespace {

using testing::HostLinearChain;
using testing::RunLinearChainOnHost;

struct Chain {
  torch::Tensor x, gy;
  std::vector<torch::Tensor> weights, biases;
};

// A random chain: x (batch, features[0]), layer l (features[l] -> features[l + 1]), an upstream gradient.
Chain RandomChain(int64_t batch, const std::vector<int64_t>& features, double bias_shift = 0.0) {
  torch::manual_seed(5);
  Chain c{torch::randn({batch, features[0]}), torch::randn({batch, features.back()}), {}, {}};
  for (size_t l = 0; l + 1 < features.size(); ++l) {
    c.weights.push_back(torch::randn({features[l + 1], features[l]}) / std::sqrt(double(features[l])));
    c.biases.push_back(torch::randn({features[l + 1]}) * 0.1 + bias_shift);
  }
  return c;
}

HostLinearChain RunOnHost(const Chain& c) { return RunLinearChainOnHost(c.x, c.weights, c.biases, c.gy); }

// ATen's chain in double against ours: output and gradients within float32's rounding of sums of a
// few hundred terms.
void ExpectAtensChain(const Chain& c, const HostLinearChain& ours) {
  auto x = c.x.to(torch::kDouble).requires_grad_();
  std::vector<torch::Tensor> w, b;
  torch::Tensor v = x;
  for (size_t l = 0; l < c.weights.size(); ++l) {
    w.push_back(c.weights[l].to(torch::kDouble).requires_grad_());
    b.push_back(c.biases[l].to(torch::kDouble).requires_grad_());
    v = torch::linear(v, w.back(), b.back());
    if (l + 1 < c.weights.size()) v = torch::relu(v);
  }
  (v * c.gy.to(torch::kDouble)).sum().backward();
  EXPECT_TRUE(torch::allclose(ours.y.to(torch::kDouble), v.detach(), 1e-5, 1e-5)) << ours.y - v;
  EXPECT_TRUE(torch::allclose(ours.gx.to(torch::kDouble), x.grad(), 1e-5, 1e-5)) << ours.gx - x.grad();
  for (size_t l = 0; l < c.weights.size(); ++l) {
    EXPECT_TRUE(torch::allclose(ours.gw[l].to(torch::kDouble), w[l].grad(), 1e-4, 1e-4)) << l;
    EXPECT_TRUE(torch::allclose(ours.gb[l].to(torch::kDouble), b[l].grad(), 1e-4, 1e-4)) << l;
  }
}

TEST(LinearChainArithmetic, IsAtensHeadOnLeNetsFullyConnectedLayers) {
  const Chain c = RandomChain(8, {400, 120, 84, 10});
  ExpectAtensChain(c, RunOnHost(c));
}

TEST(LinearChainArithmetic, TakesOneLayerAndWidthsThatFillNoWarpOrRowGroup) {
  const Chain one = RandomChain(3, {7, 5});
  ExpectAtensChain(one, RunOnHost(one));
  const Chain odd = RandomChain(5, {33, 1, 13, 3});  // a one-feature layer, widths off every multiple
  ExpectAtensChain(odd, RunOnHost(odd));
}

TEST(LinearChainArithmetic, SumsAnInputWiderThanABlockInOnePartAndFourLayers) {
  const Chain c = RandomChain(2, {1500, 40, 30, 20, 6});  // 1,500 inputs > the block's 1,024 threads
  ExpectAtensChain(c, RunOnHost(c));
}

TEST(LinearChainArithmetic, SumsABatchLargerThanATileChunkInSampleOrder) {
  const Chain c = RandomChain(70, {50, 20, 5});  // three chunks of kTileSamples = 32
  ExpectAtensChain(c, RunOnHost(c));
}

TEST(LinearChainArithmetic, AClosedReluPassesNoGradientToTheLayersBeforeIt) {
  const Chain c = RandomChain(4, {20, 16, 8}, /*bias_shift=*/-100.0);  // the hidden layer's outputs all 0
  const auto ours = RunOnHost(c);
  EXPECT_TRUE(torch::equal(ours.gx, torch::zeros_like(ours.gx)));
  EXPECT_TRUE(torch::equal(ours.gw[0], torch::zeros_like(ours.gw[0])));
  EXPECT_TRUE(torch::equal(ours.gb[0], torch::zeros_like(ours.gb[0])));
  EXPECT_TRUE(torch::equal(ours.gw[1], torch::zeros_like(ours.gw[1]))) << "its inputs are relu's zeros";
  ExpectAtensChain(c, ours);
}

TEST(LinearChainArithmetic, ANanInTheInputReachesTheOutputsItFeedsAsInAten) {
  Chain c = RandomChain(3, {12, 6, 4});
  c.x[1][5] = NAN;
  const auto ours = RunOnHost(c);
  EXPECT_TRUE(ours.y[1].isnan().all().item<bool>());
  EXPECT_FALSE(ours.y[0].isnan().any().item<bool>());
  EXPECT_FALSE(ours.y[2].isnan().any().item<bool>());
}

TEST(LinearChainArithmetic, TakesShapesWhoseBlocksFitSharedMemoryAndOneToFourLayers) {
  kernels::LinearChainShape lenet;
  lenet.batch = 32, lenet.layers = 3;
  for (int l = 0; l < 4; ++l) lenet.features[l] = std::array{400, 120, 84, 10}[l];
  EXPECT_TRUE(kernels::FitsTheKernels(lenet));
  auto wide = lenet;
  wide.features[0] = 12000;
  EXPECT_FALSE(kernels::FitsTheKernels(wide)) << "a sample's vectors past 48 KiB";
  auto none = lenet;
  none.layers = 0;
  EXPECT_FALSE(kernels::FitsTheKernels(none));
  auto empty = lenet;
  empty.batch = 0;
  EXPECT_FALSE(kernels::FitsTheKernels(empty));
  auto zero_width = lenet;
  zero_width.features[2] = 0;
  EXPECT_FALSE(kernels::FitsTheKernels(zero_width));
}

TEST(LinearReluChain, LeavesTheCpuToAten) {
  torch::nn::Linear fc1(400, 120), fc2(120, 10);
  EXPECT_FALSE(FusedLinearReluChainApplies(torch::zeros({2, 400}), {fc1, fc2}));
}

}  // namespace
}  // namespace mgpu
