// mgpu's fused CUDA kernels (models/conv_relu_pool.h, models/linear_relu_chain.h) on a GPU: the same bits as their arithmetic
// run on the CPU (whose agreement with ATen the unit tests check), only where they apply, and
// LeNet trained with them as LeNet trained with ATen's kernels, eager and CUDA-graphed. Skipped,
// saying so, on machines without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "models/conv_relu_pool.h"
#include "models/fused_kernels.h"
#include "models/linear_relu_chain.h"
#include "tests/support/conv_relu_pool_on_host.h"
#include "tests/support/linear_chain_on_host.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

class ConvReluPoolCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  }
};

struct StageSize {
  int64_t batch, channels, height, width, filters, kernel, padding;
};

// The kernels on the GPU against RunConvReluPoolOnHost: output, pooling choices and gradients, bit for bit.
void ExpectTheHostsBits(const StageSize& size) {
  torch::manual_seed(3);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(size.channels, size.filters, size.kernel).padding(size.padding));
  const torch::Tensor x = torch::randn({size.batch, size.channels, size.height, size.width});
  const int64_t pooled_h = (size.height + 2 * size.padding - size.kernel + 1) / 2;
  const int64_t pooled_w = (size.width + 2 * size.padding - size.kernel + 1) / 2;
  const torch::Tensor gy = torch::randn({size.batch, size.filters, pooled_h, pooled_w});
  const auto host = size.kernel == 5 ? RunConvReluPoolOnHost<5>(x, conv->weight.detach(), conv->bias.detach(),
                                                                size.padding, gy)
                                     : RunConvReluPoolOnHost<0>(x, conv->weight.detach(), conv->bias.detach(),
                                                                size.padding, gy);
  conv->to(torch::kCUDA);
  const torch::Tensor x_cuda = x.cuda().requires_grad_();
  ASSERT_TRUE(FusedConvReluPoolApplies(x_cuda, *conv));
  const torch::Tensor y = ConvReluPool(x_cuda, *conv);
  y.backward(gy.cuda());
  EXPECT_TRUE(torch::equal(y.cpu(), host.y)) << (y.cpu() - host.y).abs().max();
  EXPECT_TRUE(torch::equal(x_cuda.grad().cpu(), host.gx)) << (x_cuda.grad().cpu() - host.gx).abs().max();
  EXPECT_TRUE(torch::equal(conv->weight.grad().cpu(), host.gw)) << (conv->weight.grad().cpu() - host.gw).abs().max();
  EXPECT_TRUE(torch::equal(conv->bias.grad().cpu(), host.gb)) << (conv->bias.grad().cpu() - host.gb).abs().max();
}

TEST_F(ConvReluPoolCuda, ComputesTheBitsOfItsArithmeticOnTheCpu) {
  ExpectTheHostsBits({32, 1, 28, 28, 6, 5, 2});   // LeNet's first stage at batch 32
  ExpectTheHostsBits({32, 6, 14, 14, 16, 5, 0});  // its second
  ExpectTheHostsBits({5, 3, 11, 9, 4, 3, 1});     // any filter size, an odd conv output
}

TEST_F(ConvReluPoolCuda, LeavesAutocastHalfPrecisionChannelsLastAndMismatchesToAten) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 5).padding(2));
  conv->to(torch::kCUDA);
  const torch::Tensor x = torch::randn({2, 3, 16, 16}, torch::kCUDA);
  EXPECT_TRUE(FusedConvReluPoolApplies(x, *conv));
  EXPECT_FALSE(FusedConvReluPoolApplies(x.to(torch::kBFloat16), *conv));
  EXPECT_FALSE(FusedConvReluPoolApplies(x.contiguous(torch::MemoryFormat::ChannelsLast), *conv));
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  EXPECT_FALSE(FusedConvReluPoolApplies(x, *conv));
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  UseFusedKernels(false);
  EXPECT_FALSE(FusedConvReluPoolApplies(x, *conv));
  UseFusedKernels(true);
  torch::nn::Conv2d strided(torch::nn::Conv2dOptions(3, 4, 5).stride(2));
  strided->to(torch::kCUDA);
  EXPECT_FALSE(FusedConvReluPoolApplies(x, *strided));
  torch::nn::Conv2d on_the_cpu(torch::nn::Conv2dOptions(3, 4, 5).padding(2));
  EXPECT_FALSE(FusedConvReluPoolApplies(x, *on_the_cpu)) << "ATen reports the devices' mismatch";
}

using LinearReluChainCuda = ConvReluPoolCuda;

// The kernels on the GPU against RunLinearChainOnHost: output and gradients, bit for bit.
void ExpectTheHostsBits(int64_t batch, const std::vector<int64_t>& features) {
  torch::manual_seed(4);
  std::vector<torch::nn::Linear> layers;
  std::vector<torch::Tensor> weights, biases;
  for (size_t l = 0; l + 1 < features.size(); ++l) {
    layers.emplace_back(features[l], features[l + 1]);
    weights.push_back(layers.back()->weight.detach().clone()), biases.push_back(layers.back()->bias.detach().clone());
    layers.back()->to(torch::kCUDA);
  }
  const torch::Tensor x = torch::randn({batch, features[0]}), gy = torch::randn({batch, features.back()});
  const auto host = RunLinearChainOnHost(x, weights, biases, gy);
  const torch::Tensor x_cuda = x.cuda().requires_grad_();
  ASSERT_TRUE(FusedLinearReluChainApplies(x_cuda, layers));
  const torch::Tensor y = LinearReluChain(x_cuda, layers);
  y.backward(gy.cuda());
  EXPECT_TRUE(torch::equal(y.cpu(), host.y)) << (y.cpu() - host.y).abs().max();
  EXPECT_TRUE(torch::equal(x_cuda.grad().cpu(), host.gx)) << (x_cuda.grad().cpu() - host.gx).abs().max();
  for (size_t l = 0; l < layers.size(); ++l) {
    EXPECT_TRUE(torch::equal(layers[l]->weight.grad().cpu(), host.gw[l])) << l;
    EXPECT_TRUE(torch::equal(layers[l]->bias.grad().cpu(), host.gb[l])) << l;
  }
}

TEST_F(LinearReluChainCuda, ComputesTheBitsOfItsArithmeticOnTheCpu) {
  ExpectTheHostsBits(32, {400, 120, 84, 10});     // LeNet's head at batch 32
  ExpectTheHostsBits(5, {33, 1, 13, 3});          // widths off every warp and row group
  ExpectTheHostsBits(3, {1500, 40, 30, 20, 6});   // an input wider than a block, four layers
  ExpectTheHostsBits(70, {50, 20, 5});            // three chunks of samples per parameter tile
}

TEST_F(LinearReluChainCuda, LeavesAutocastHalfPrecisionStridedInputsAndMismatchesToAten) {
  std::vector<torch::nn::Linear> layers = {torch::nn::Linear(16, 8), torch::nn::Linear(8, 4)};
  for (auto& layer : layers) layer->to(torch::kCUDA);
  const torch::Tensor x = torch::randn({6, 16}, torch::kCUDA);
  EXPECT_TRUE(FusedLinearReluChainApplies(x, layers));
  EXPECT_FALSE(FusedLinearReluChainApplies(x.to(torch::kBFloat16), layers));
  EXPECT_FALSE(FusedLinearReluChainApplies(torch::randn({16, 6}, torch::kCUDA).t(), layers)) << "not contiguous";
  EXPECT_FALSE(FusedLinearReluChainApplies(torch::randn({6, 8}, torch::kCUDA), layers)) << "another width";
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  EXPECT_FALSE(FusedLinearReluChainApplies(x, layers));
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  UseFusedKernels(false);
  EXPECT_FALSE(FusedLinearReluChainApplies(x, layers));
  UseFusedKernels(true);
  EXPECT_FALSE(FusedLinearReluChainApplies(x, {layers[0], torch::nn::Linear(8, 4)})) << "ATen reports the devices";
  EXPECT_FALSE(FusedLinearReluChainApplies(x, {layers[0], layers[0]})) << "8 features into a 16-feature layer";
  torch::nn::Linear no_bias(torch::nn::LinearOptions(8, 4).bias(false));
  no_bias->to(torch::kCUDA);
  EXPECT_FALSE(FusedLinearReluChainApplies(x, {layers[0], no_bias}));
}

class LeNetFusedKernelsCuda : public ConvReluPoolCuda {
 protected:
  void SetUp() override {
    ConvReluPoolCuda::SetUp();
    if (!IsSkipped()) WriteTinyMnistLike(dir_ / "data", 650, 200);
  }
  nlohmann::json Train(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", dir_ / "data", "--device", "cuda",
                                     "--precision", "fp32", "--batch-size", "64", "--epochs", "2", "--seed", "9",
                                     "--lr", "0.003", "--out", dir_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    log_ = ReadText(dir_ / (name + "/logs/rank-0.log"));
    return nlohmann::json::parse(ReadText(dir_ / (name + "/summary.json")));
  }
  TempDir dir_;
  std::string log_;
};

// float32 without TF32 on both sides: only the order of the sums differs, so the runs end within
// the suite's float32 reordering tolerance (22 steps, a longest sum over a batch of 64 conv planes).
TEST_F(LeNetFusedKernelsCuda, TrainsAsWithAtensKernelsEagerAndGraphed) {
  const auto aten = Train("aten", {"--fused-kernels", "false"});
  EXPECT_NE(log_.find("off (--fused-kernels false)"), std::string::npos) << log_;
  const auto fused = Train("fused", {});
  EXPECT_NE(log_.find("mgpu's where they apply"), std::string::npos) << log_;
  const auto graphed = Train("fused-graphed", {"--cuda-graphs", "true"});
  const double tolerance = Float32ReorderingTolerance(22, 64 * 28 * 28);
  const double reference = aten["param_checksum"];
  for (const auto* run : {&fused, &graphed}) {
    EXPECT_NEAR((*run)["param_checksum"].get<double>(), reference, tolerance * std::abs(reference));
    EXPECT_NEAR((*run)["test_accuracy"].get<double>(), aten["test_accuracy"].get<double>(), 2.0);
  }
  EXPECT_TRUE(graphed["cuda_graphs"]["captured"].get<bool>());
}

}  // namespace
}  // namespace mgpu
