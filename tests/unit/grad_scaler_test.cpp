// Specification of GradScaler against torch.amp.GradScaler's documented behaviour: scale
// 2^16 by default, ×2 after growth_interval consecutive clean steps, ×0.5 and a skipped step
// on inf/NaN gradients, unscaling once per step, static scales, checkpointable state.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "amp/grad_scaler.h"
#include "common/status.h"

namespace mgpu {
namespace {

const torch::Device kCpu(torch::kCPU);

// One parameter w (3 elements) and loss = sum(w * x): the gradient of w is x.
struct Toy {
  torch::Tensor w = torch::tensor({1.0f, 2.0f, 3.0f}).requires_grad_();
  FusedOptimizer optimizer{{w}, [] {
                             OptimizerOptions o;
                             o.kind = "sgd";
                             o.lr = 0.1;
                             return o;
                           }()};

  // A full scaled step whose gradient is `x`; returns the loss.
  void Step(GradScaler& scaler, const torch::Tensor& x) {
    optimizer.ZeroGrad();
    scaler.Scale((w * x).sum()).backward();
    scaler.Step(optimizer);
    scaler.Update();
  }
};

torch::Tensor Clean() { return torch::tensor({1.0f, 1.0f, 1.0f}); }
torch::Tensor WithInf() { return torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 1.0f}); }

int GrowthTracker(const GradScaler& scaler) { return scaler.StateTensors()[1].item<int>(); }

TEST(GradScaler, DefaultsAreTorchAmpGradScalers) {
  GradScalerOptions defaults;
  EXPECT_EQ(defaults.init_scale, 65536.0);
  EXPECT_EQ(defaults.growth_factor, 2.0);
  EXPECT_EQ(defaults.backoff_factor, 0.5);
  EXPECT_EQ(defaults.growth_interval, 2000);
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu);
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.Scale(torch::tensor(0.5f)).item<float>(), 32768.0f);
  EXPECT_EQ(scaler.scale_tensor().scalar_type(), torch::kFloat);
}

TEST(GradScaler, GrowsAfterIntervalCleanStepsAndBacksOffAndResetsOnInf) {
  GradScalerOptions options;
  options.init_scale = 8;
  options.growth_interval = 3;
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu, options);
  Toy toy;
  // (gradient, scale after the step, growth tracker after the step), derived from
  // torch._amp_update_scale_'s rule.
  const std::vector<std::tuple<bool, double, int>> golden = {
      {false, 8, 1}, {false, 8, 2}, {false, 16, 0},  // third clean step: ×2
      {true, 8, 0},                                  // inf: ×0.5, tracker reset
      {false, 8, 1}, {false, 8, 2}, {true, 4, 0},    // inf before the interval: no growth
      {false, 4, 1}, {false, 4, 2}, {false, 8, 0}};
  for (size_t i = 0; i < golden.size(); ++i) {
    const auto [inf, scale, tracker] = golden[i];
    toy.Step(scaler, inf ? WithInf() : Clean());
    EXPECT_EQ(scaler.scale(), scale) << "after step " << i + 1;
    EXPECT_EQ(GrowthTracker(scaler), tracker) << "after step " << i + 1;
  }
  EXPECT_EQ(scaler.skipped_steps(), 2);
}

TEST(GradScaler, SkippedStepLeavesParametersAndAdamStateUnchanged) {
  torch::Tensor w = torch::tensor({1.0f, 2.0f}).requires_grad_();
  FusedOptimizer adam({w}, OptimizerOptions{});
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu);
  adam.ZeroGrad();
  scaler.Scale((w * torch::tensor({std::nanf(""), 1.0f})).sum()).backward();
  scaler.Step(adam);
  scaler.Update();
  EXPECT_TRUE(torch::equal(w, torch::tensor({1.0f, 2.0f})));
  EXPECT_EQ(adam.StateTensors()[0].item<float>(), 0.0f) << "Adam's step count is taken back";
  EXPECT_EQ(scaler.found_inf().item<float>(), 1.0f);
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(GradScaler, CleanScaledStepEqualsTheUnscaledStep) {
  Toy scaled, plain;
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu);
  scaled.Step(scaler, torch::tensor({0.5f, -2.0f, 3.0f}));
  plain.optimizer.ZeroGrad();
  (plain.w * torch::tensor({0.5f, -2.0f, 3.0f})).sum().backward();
  plain.optimizer.Step();
  EXPECT_TRUE(torch::allclose(scaled.w, plain.w));
}

TEST(GradScaler, UnscaleDividesOncePerStepThenStepDoesNotDivideAgain) {
  Toy toy;
  GradScaler scaler(ParseLossScaling("1024"), kCpu);
  toy.optimizer.ZeroGrad();
  scaler.Scale((toy.w * torch::tensor({0.5f, -2.0f, 3.0f})).sum()).backward();
  EXPECT_TRUE(torch::equal(toy.w.grad(), torch::tensor({512.0f, -2048.0f, 3072.0f})));
  scaler.Unscale(toy.optimizer);
  scaler.Unscale(toy.optimizer);
  EXPECT_TRUE(torch::equal(toy.w.grad(), torch::tensor({0.5f, -2.0f, 3.0f})));
  EXPECT_EQ(scaler.found_inf().item<float>(), 0.0f);
  scaler.Step(toy.optimizer);
  scaler.Update();
  EXPECT_TRUE(torch::allclose(toy.w, torch::tensor({1.0f - 0.05f, 2.0f + 0.2f, 3.0f - 0.3f})));
}

TEST(GradScaler, UnscaleFlagsNonFiniteGradients) {
  Toy toy;
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu);
  toy.optimizer.ZeroGrad();
  scaler.Scale((toy.w * WithInf()).sum()).backward();
  scaler.Unscale(toy.optimizer);
  EXPECT_EQ(scaler.found_inf().item<float>(), 1.0f);
  const torch::Tensor before = toy.w.detach().clone();
  scaler.Step(toy.optimizer);
  EXPECT_TRUE(torch::equal(toy.w, before));
}

TEST(GradScaler, StaticScaleNeverChangesButStillSkipsNonFiniteSteps) {
  GradScaler scaler(ParseLossScaling("128"), kCpu);
  EXPECT_EQ(scaler.mode(), LossScaling::Mode::kStatic);
  Toy toy;
  for (int i = 0; i < 4; ++i) toy.Step(scaler, Clean());
  const torch::Tensor before = toy.w.detach().clone();
  toy.Step(scaler, WithInf());
  EXPECT_TRUE(torch::equal(toy.w, before));
  EXPECT_EQ(scaler.scale(), 128.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(GradScaler, WithScalingOffTheLossPassesThroughAndOnlyTheSkipFlagSkips) {
  GradScaler scaler(ParseLossScaling("none"), kCpu);
  EXPECT_FALSE(scaler.enabled());
  const torch::Tensor loss = torch::tensor(3.0f);
  EXPECT_TRUE(scaler.Scale(loss).is_same(loss));
  Toy toy;
  toy.Step(scaler, Clean());
  EXPECT_TRUE(torch::allclose(toy.w, torch::tensor({0.9f, 1.9f, 2.9f})));
  toy.optimizer.ZeroGrad();
  (toy.w * Clean()).sum().backward();
  scaler.Step(toy.optimizer, torch::tensor(true));
  EXPECT_TRUE(torch::allclose(toy.w, torch::tensor({0.9f, 1.9f, 2.9f}))) << "skipped on request";
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), 1.0);
}

// A step taken in parts (DDP's buckets): only without scaling; the skip flag reaches every part
// and the skipped step is counted once.
TEST(GradScaler, AStepInPartsTakesTheSkipFlagAndCountsTheSkipOnce) {
  GradScaler off(ParseLossScaling("none"), kCpu);
  EXPECT_FALSE(off.BeginStepInParts().has_value()) << "nothing can skip: the parts step unconditionally";
  Toy toy;
  toy.optimizer.ZeroGrad();
  (toy.w * Clean()).sum().backward();
  const auto found_inf = off.BeginStepInParts(torch::tensor(true));
  ASSERT_TRUE(found_inf.has_value());
  toy.optimizer.StepParameters({0}, std::nullopt, found_inf);
  off.Update();
  EXPECT_TRUE(torch::equal(toy.w, torch::tensor({1.0f, 2.0f, 3.0f}))) << "skipped on request";
  EXPECT_EQ(off.skipped_steps(), 1);
  toy.optimizer.ZeroGrad();
  (toy.w * Clean()).sum().backward();
  const auto clean = off.BeginStepInParts(torch::tensor(false));
  toy.optimizer.StepParameters({0}, std::nullopt, clean);
  EXPECT_TRUE(torch::allclose(toy.w, torch::tensor({0.9f, 1.9f, 2.9f})));
  EXPECT_EQ(off.skipped_steps(), 1);
  GradScaler dynamic(ParseLossScaling("dynamic"), kCpu);
  EXPECT_THROW(dynamic.BeginStepInParts(), Error) << "scaling checks every gradient before any part steps";
}

TEST(GradScaler, AllReduceHookCanMakeEveryRankSkip) {
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu);
  int calls = 0;
  // Another rank found an inf: the MAX all-reduce turns this rank's 0 into 1.
  scaler.SetAllReduceFoundInf([&](torch::Tensor& found_inf) {
    ++calls;
    EXPECT_EQ(found_inf.item<float>(), 0.0f);
    found_inf.fill_(1.0f);
  });
  Toy toy;
  const torch::Tensor before = toy.w.detach().clone();
  toy.Step(scaler, Clean());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(torch::equal(toy.w, before));
  EXPECT_EQ(scaler.scale(), 32768.0);
}

TEST(GradScaler, StateRoundTripsSoThatGrowthContinuesOnSchedule) {
  GradScalerOptions options;
  options.init_scale = 8;
  options.growth_interval = 3;
  GradScaler first(ParseLossScaling("dynamic"), kCpu, options);
  Toy toy;
  toy.Step(first, WithInf());  // scale 4
  toy.Step(first, Clean());
  toy.Step(first, Clean());    // tracker 2
  GradScaler restored(ParseLossScaling("dynamic"), kCpu, options);
  restored.LoadStateTensors(first.StateTensors());
  EXPECT_EQ(restored.scale(), 4.0);
  EXPECT_EQ(GrowthTracker(restored), 2);
  EXPECT_EQ(restored.skipped_steps(), 1) << "the skipped-step count continues too";
  toy.Step(restored, Clean());
  EXPECT_EQ(restored.scale(), 8.0) << "the third clean step since the inf grows the scale";
  EXPECT_THROW(restored.LoadStateTensors({}), BadInputError);
}

TEST(GradScaler, MasterWeightGradientsAreUnscaledInFloat32) {
  // A true gradient of 2^-30 is 2^-14 once scaled by 2^16: representable in float16. Unscaled
  // in float16 it would flush to zero (below 2^-24); the float32 master gradient keeps it.
  torch::Tensor w = torch::ones({2}, torch::kHalf).requires_grad_();
  OptimizerOptions o;
  o.kind = "sgd";
  o.master_weights = true;
  FusedOptimizer optimizer({w}, o);
  GradScaler scaler(ParseLossScaling("dynamic"), kCpu);
  optimizer.ZeroGrad();
  const float tiny = std::ldexp(1.0f, -30);
  scaler.Scale((w.to(torch::kFloat) * tiny).sum()).backward();
  scaler.Unscale(optimizer);
  const torch::Tensor master_grad = optimizer.Gradients()[0];
  EXPECT_EQ(master_grad.scalar_type(), torch::kFloat);
  EXPECT_EQ(master_grad[0].item<float>(), tiny);
  EXPECT_EQ(w.grad()[0].item<float>(), std::ldexp(1.0f, -14)) << "the model's gradient is left scaled";
}

TEST(LossScaling, ParsesNoneDynamicAndPositiveNumbers) {
  EXPECT_EQ(ParseLossScaling("none").mode, LossScaling::Mode::kNone);
  EXPECT_EQ(ParseLossScaling("dynamic").mode, LossScaling::Mode::kDynamic);
  EXPECT_EQ(ParseLossScaling("1024").static_scale, 1024.0);
  EXPECT_EQ(LossScalingModeName(ParseLossScaling("1024").mode), "static");
  for (const std::string bad : {"0", "-8", "inf", "auto", ""}) {
    try {
      ParseLossScaling(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const BadInputError& e) {
      EXPECT_NE(std::string(e.what()).find("none, dynamic, or a positive number"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mgpu
