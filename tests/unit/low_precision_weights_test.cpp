// Specification of LowPrecisionWeights (amp/low_precision_weights.h), on the CPU's autocast: a
// forward and backward through the batched copies gives autocast's loss and gradients bit for
// bit, in either memory format, step after step, and leaves the modules as they were.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "amp/autocast.h"
#include "amp/low_precision_weights.h"
#include "models/memory_format.h"

namespace mgpu {
namespace {

namespace nn = torch::nn;

struct SmallNetImpl : nn::Module {
  SmallNetImpl()
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1)))),
        fc(register_module("fc", nn::Linear(16, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor y = torch::relu(conv2(torch::relu(conv1(x))));  // (B, 16, H, W)
    return fc(y.mean({2, 3})).to(torch::kFloat);                        // (B, 10)
  }
  nn::Conv2d conv1, conv2;
  nn::Linear fc;
};
TORCH_MODULE(SmallNet);

// The loss and every parameter's gradient of one step on (x, labels), with or without the copies.
std::pair<torch::Tensor, std::vector<torch::Tensor>> Step(SmallNet& net, LowPrecisionWeights* copies,
                                                          const torch::Tensor& x, const torch::Tensor& labels) {
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  torch::Tensor loss;
  {
    AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    std::optional<LowPrecisionWeights::InForward> in_forward;
    if (copies) in_forward.emplace(*copies);
    loss = torch::nn::functional::cross_entropy(net->forward(x), labels);
  }
  loss.backward();
  if (copies) copies->CollectGradients();
  std::vector<torch::Tensor> gradients;
  for (const auto& p : net->parameters()) gradients.push_back(p.grad().clone());
  return {loss.detach(), gradients};
}

void ExpectAutocastsBits(bool channels_last) {
  SCOPED_TRACE(channels_last ? "channels-last" : "NCHW");
  torch::manual_seed(31);
  SmallNet autocast_net, batched_net;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < autocast_net->parameters().size(); ++i) {
      batched_net->parameters()[i].copy_(autocast_net->parameters()[i]);
    }
  }
  if (channels_last) ConvertToChannelsLast(*autocast_net), ConvertToChannelsLast(*batched_net);
  const auto copies = LowPrecisionWeights::Of(*batched_net, torch::kBFloat16);
  ASSERT_NE(copies, nullptr);
  EXPECT_EQ(copies->size(), 4u) << "conv1 and conv2's weights, fc's weight and bias (conv2's bias is not cast)";
  const torch::Tensor* conv1_weight_before = &batched_net->conv1->weight;
  const void* conv1_data_before = batched_net->conv1->weight.data_ptr();
  for (int step = 0; step < 3; ++step) {
    torch::Tensor x = torch::randn({4, 3, 8, 8});
    if (channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    const torch::Tensor labels = torch::randint(0, 10, {4});
    const auto [autocast_loss, autocast_gradients] = Step(autocast_net, nullptr, x, labels);
    const auto [batched_loss, batched_gradients] = Step(batched_net, copies.get(), x, labels);
    EXPECT_TRUE(torch::equal(batched_loss, autocast_loss)) << "step " << step;
    for (size_t i = 0; i < autocast_gradients.size(); ++i) {
      EXPECT_TRUE(torch::equal(batched_gradients[i], autocast_gradients[i])) << "step " << step << ", parameter " << i;
      EXPECT_EQ(batched_gradients[i].scalar_type(), torch::kFloat);
      EXPECT_EQ(batched_gradients[i].strides(), batched_net->parameters()[i].strides()) << "parameter " << i;
    }
    torch::NoGradGuard no_grad;  // a step of plain SGD on both, so the next copies must be refreshed
    for (auto* net : {&autocast_net, &batched_net}) {
      for (auto& p : (*net)->parameters()) p.sub_(p.grad(), 0.1);
    }
  }
  EXPECT_EQ(&batched_net->conv1->weight, conv1_weight_before);
  EXPECT_EQ(batched_net->conv1->weight.data_ptr(), conv1_data_before) << "the module holds its parameter again";
  EXPECT_EQ(batched_net->conv1->weight.scalar_type(), torch::kFloat);
}

TEST(LowPrecisionWeights, GiveAutocastsLossAndGradientsStepAfterStep) {
  ExpectAutocastsBits(/*channels_last=*/false);
  ExpectAutocastsBits(/*channels_last=*/true);
}

TEST(LowPrecisionWeights, AModelWithoutConvolutionsOrLinearLayersHasNone) {
  nn::Sequential model(nn::ReLU(), nn::BatchNorm2d(4));
  EXPECT_EQ(LowPrecisionWeights::Of(*model, torch::kBFloat16), nullptr);
}

}  // namespace
}  // namespace mgpu
