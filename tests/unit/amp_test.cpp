// Specification of the precision policies and of AutocastScope: which dtypes a policy gives
// the model, its inputs and the optimizer; autocast's effect on op outputs, restored state,
// nesting and thread-locality (torch.autocast's semantics).
#include <gtest/gtest.h>

#include <thread>

#include <ATen/autocast_mode.h>

#include "amp/autocast.h"
#include "amp/precision.h"
#include "common/status.h"
#include "optim/fused_optimizer.h"

namespace mgpu {
namespace {

struct ConvBnNet : torch::nn::Module {
  ConvBnNet() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4 * 6 * 6, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(torch::relu(bn(conv(x))).flatten(1)); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
};

TEST(Precision, NamesParseAndUnknownNamesListTheChoices) {
  for (const auto& name : PrecisionNames()) EXPECT_EQ(PrecisionName(ParsePrecision(name)), name);
  try {
    ParsePrecision("fp8");
    FAIL();
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("fp32, tf32, amp-fp16, amp-bf16, fp16, o2"), std::string::npos) << e.what();
  }
}

TEST(Precision, PoliciesSayTheirModelDtypeAutocastAndMasterWeights) {
  EXPECT_EQ(ModelDtype(Precision::kFp32), torch::kFloat);
  EXPECT_EQ(ModelDtype(Precision::kAmpFp16), torch::kFloat);
  EXPECT_EQ(ModelDtype(Precision::kFp16), torch::kHalf);
  EXPECT_EQ(ModelDtype(Precision::kO2), torch::kHalf);
  EXPECT_EQ(AutocastDtype(Precision::kAmpFp16), torch::kHalf);
  EXPECT_EQ(AutocastDtype(Precision::kAmpBf16), torch::kBFloat16);
  EXPECT_FALSE(AutocastDtype(Precision::kFp16).has_value());
  EXPECT_FALSE(AutocastDtype(Precision::kTf32).has_value());
  EXPECT_TRUE(UsesMasterWeights(Precision::kO2));
  EXPECT_FALSE(UsesMasterWeights(Precision::kFp16));
}

TEST(Precision, SeedStyleDtypeAndAmpMapOntoPolicies) {
  EXPECT_EQ(PrecisionFromDtype("fp32", false), Precision::kFp32);
  EXPECT_EQ(PrecisionFromDtype("fp16", false), Precision::kFp16);
  EXPECT_EQ(PrecisionFromDtype("fp16", true), Precision::kAmpFp16);
  EXPECT_EQ(PrecisionFromDtype("bf16", true), Precision::kAmpBf16);
  EXPECT_EQ(PrecisionFromDtype("", true), Precision::kAmpFp16);
  EXPECT_THROW(PrecisionFromDtype("bf16", false), BadInputError);
  EXPECT_THROW(PrecisionFromDtype("fp32", true), BadInputError);
}

// Float16 autocast on a CPU is about 100x slower than fp32: the seeds' `--amp` asks for autocast,
// which a CPU gives fast in bfloat16 (torch.autocast("cpu")'s default); a policy named outright is
// kept, with its cost said.
TEST(Precision, OnACpuTheSeedsAmpMeansBf16AndANamedAmpFp16IsKeptWithAWarning) {
  const DevicePrecision amp = PrecisionForDevice(Precision::kAmpFp16, "--amp", /*cuda=*/false);
  EXPECT_EQ(amp.precision, Precision::kAmpBf16);
  EXPECT_NE(amp.note.find("--amp on CPU means amp-bf16"), std::string::npos) << amp.note;
  EXPECT_EQ(amp.warning, "");
  EXPECT_EQ(PrecisionForDevice(Precision::kAmpFp16, "--dtype fp16 --amp", false).precision, Precision::kAmpBf16);

  const DevicePrecision named = PrecisionForDevice(Precision::kAmpFp16, "", /*cuda=*/false);
  EXPECT_EQ(named.precision, Precision::kAmpFp16);
  EXPECT_EQ(named.note, "");
  EXPECT_NE(named.warning.find("100x slower"), std::string::npos) << named.warning;

  const DevicePrecision gpu = PrecisionForDevice(Precision::kAmpFp16, "--amp", /*cuda=*/true);
  EXPECT_EQ(gpu.precision, Precision::kAmpFp16) << "torch.autocast's CUDA default";
  EXPECT_EQ(gpu.note + gpu.warning, "");
  for (const Precision other : {Precision::kFp32, Precision::kAmpBf16, Precision::kFp16, Precision::kO2}) {
    const DevicePrecision kept = PrecisionForDevice(other, "", false);
    EXPECT_EQ(kept.precision, other);
    EXPECT_EQ(kept.note + kept.warning, "");
  }
}

TEST(Precision, Fp16ConvertsTheModelButKeepsBatchNormInFloat32) {
  ConvBnNet net;
  ConvertModelForPrecision(net, Precision::kFp16);
  EXPECT_EQ(net.conv->weight.scalar_type(), torch::kHalf);
  EXPECT_EQ(net.fc->bias.scalar_type(), torch::kHalf);
  EXPECT_EQ(net.bn->weight.scalar_type(), torch::kFloat);
  EXPECT_EQ(net.bn->running_var.scalar_type(), torch::kFloat);
  EXPECT_EQ(net.bn->num_batches_tracked.scalar_type(), torch::kLong) << "integer buffers are not cast";
  EXPECT_TRUE(net.conv->weight.requires_grad());
  const torch::Tensor out = net.forward(torch::randn({2, 1, 8, 8}).to(torch::kHalf));
  EXPECT_EQ(out.scalar_type(), torch::kHalf);
  out.to(torch::kFloat).sum().backward();
  EXPECT_EQ(net.bn->weight.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(net.conv->weight.grad().scalar_type(), torch::kHalf);
}

TEST(Precision, Fp32PoliciesLeaveTheModelAlone) {
  ConvBnNet net;
  ConvertModelForPrecision(net, Precision::kAmpBf16);
  EXPECT_EQ(net.conv->weight.scalar_type(), torch::kFloat);
}

TEST(Precision, O2StepsFloat32MasterWeightsAndCopiesThemBackIntoTheModel) {
  ConvBnNet net;
  ConvertModelForPrecision(net, Precision::kO2);
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.01;
  o.master_weights = true;
  FusedOptimizer optimizer(net.parameters(), o);
  const auto params = net.parameters();
  const auto& stepped = optimizer.stepped_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(stepped[i].scalar_type(), torch::kFloat) << i;
    // BatchNorm's float32 parameters are their own masters.
    EXPECT_EQ(stepped[i].is_same(params[i]), params[i].scalar_type() == torch::kFloat) << i;
  }
  net.forward(torch::randn({2, 1, 8, 8}).to(torch::kHalf)).to(torch::kFloat).sum().backward();
  optimizer.Step();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[i], stepped[i].to(params[i].scalar_type()))) << i;
  }
}

TEST(Precision, MasterWeightsKeepUpdatesThatFloat16RoundsAway) {
  // Near 1, float16's spacing is 2^-11 ≈ 4.9e-4: a step of 1e-4 is lost in a float16 weight.
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 1e-4;
  torch::Tensor half_only = torch::ones({1}, torch::kHalf).requires_grad_();
  torch::Tensor with_master = torch::ones({1}, torch::kHalf).requires_grad_();
  FusedOptimizer plain({half_only}, o);
  o.master_weights = true;
  FusedOptimizer o2({with_master}, o);
  for (int i = 0; i < 10; ++i) {
    for (auto* opt : {&plain, &o2}) opt->ZeroGrad();
    half_only.mutable_grad() = torch::ones({1}, torch::kHalf);
    with_master.mutable_grad() = torch::ones({1}, torch::kHalf);
    plain.Step();
    o2.Step();
  }
  EXPECT_EQ(half_only.item<float>(), 1.0f);
  EXPECT_NEAR(o2.stepped_parameters()[0].item<float>(), 0.999f, 1e-6);
  EXPECT_LT(with_master.item<float>(), 1.0f);
}

TEST(Autocast, CpuBfloat16ScopeMakesMatmulAndConvBfloat16AndRestoresOnExit) {
  const torch::Tensor a = torch::randn({4, 4}), image = torch::randn({1, 1, 6, 6}), kernel = torch::randn({2, 1, 3, 3});
  ASSERT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  const torch::ScalarType dtype_before = at::autocast::get_autocast_dtype(torch::kCPU);
  {
    AutocastScope scope(torch::kCPU, torch::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(torch::kCPU));
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(torch::conv2d(image, kernel).scalar_type(), torch::kBFloat16);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(torch::mm(a, a), torch::zeros({4}, torch::kLong));
    EXPECT_EQ(loss.scalar_type(), torch::kFloat) << "losses are on autocast's float32 list";
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  EXPECT_EQ(at::autocast::get_autocast_dtype(torch::kCPU), dtype_before);
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
}

TEST(Autocast, GradientsOfFloat32ParametersStayFloat32) {
  torch::nn::Linear layer(4, 2);
  torch::Tensor loss;
  {
    AutocastScope scope(torch::kCPU, torch::kBFloat16);
    loss = layer(torch::randn({3, 4})).to(torch::kFloat).pow(2).sum();
  }
  loss.backward();
  EXPECT_EQ(layer->weight.grad().scalar_type(), torch::kFloat);
}

TEST(Autocast, NestedScopesRestoreTheOuterState) {
  const torch::Tensor a = torch::randn({2, 2});
  {
    AutocastScope outer(torch::kCPU, torch::kBFloat16);
    {
      AutocastScope inner(torch::kCPU, torch::kBFloat16, /*enabled=*/false);
      EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
      {
        AutocastScope innermost(torch::kCPU, torch::kHalf);
        EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kHalf);
      }
      EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
    }
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(at::autocast::get_autocast_dtype(torch::kCPU), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
}

TEST(Autocast, StateIsPerThreadSoEachWorkerThreadNeedsItsOwnScope) {
  const torch::Tensor a = torch::randn({2, 2});
  torch::ScalarType in_other_thread = torch::kDouble, in_worker_scope = torch::kDouble;
  {
    AutocastScope main_scope(torch::kCPU, torch::kBFloat16);
    std::thread([&] { in_other_thread = torch::mm(a, a).scalar_type(); }).join();
  }
  EXPECT_EQ(in_other_thread, torch::kFloat) << "the main thread's scope does not reach other threads";
  std::thread([&] {
    AutocastScope worker_scope(torch::kCPU, torch::kBFloat16);
    in_worker_scope = torch::mm(a, a).scalar_type();
  }).join();
  EXPECT_EQ(in_worker_scope, torch::kBFloat16);
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat) << "nor does a worker's reach the main thread";
}

}  // namespace
}  // namespace mgpu
