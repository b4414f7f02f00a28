// Specification of the fused optimizers: the same trajectory as LibTorch's reference
// optimizers (torch.optim's rules), and the GradScaler contract (unscale, skip on inf).
#include <gtest/gtest.h>

#include <limits>

#include "common/status.h"
#include "optim/fused_optimizer.h"

namespace mgpu {
namespace {

std::vector<torch::Tensor> MakeParameters(uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({4, 3}).requires_grad_(), torch::randn({3}).requires_grad_(), torch::randn({2, 2, 2}).requires_grad_()};
}

std::vector<torch::Tensor> Clone(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : params) copies.push_back(p.detach().clone().requires_grad_());
  return copies;
}

// Sets the same pseudo-random gradient on both parameter lists for step `step`.
void SetGradients(std::vector<torch::Tensor>& a, std::vector<torch::Tensor>& b, int step) {
  for (size_t i = 0; i < a.size(); ++i) {
    torch::manual_seed(1000 + 10 * step + static_cast<int>(i));
    torch::Tensor g = torch::randn_like(a[i]);
    a[i].mutable_grad() = g.clone();
    b[i].mutable_grad() = g.clone();
  }
}

// `kind` at lr 0.05, SGD with momentum 0.9.
OptimizerOptions OptionsOfKind(const std::string& kind, double weight_decay = 0.0) {
  OptimizerOptions o;
  o.kind = kind;
  o.lr = 0.05;
  o.momentum = kind == "sgd" ? 0.9 : 0.0;
  o.weight_decay = weight_decay;
  return o;
}

double MaxDifference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

template <typename Reference>
void ExpectSameTrajectory(const OptimizerOptions& options, Reference make_reference) {
  std::vector<torch::Tensor> fused_params = MakeParameters(3), reference_params = Clone(fused_params);
  FusedOptimizer fused(fused_params, options);
  auto reference = make_reference(reference_params);
  for (int step = 0; step < 6; ++step) {
    SetGradients(fused_params, reference_params, step);
    fused.Step();
    reference.step();
  }
  EXPECT_LT(MaxDifference(fused_params, reference_params), 1e-6) << options.kind;
}

TEST(FusedOptimizer, AdamMatchesTheReference) {
  OptimizerOptions o;
  o.kind = "adam";
  o.lr = 0.01;
  o.weight_decay = 0.1;
  ExpectSameTrajectory(o, [&](std::vector<torch::Tensor> p) {
    return torch::optim::Adam(p, torch::optim::AdamOptions(0.01).weight_decay(0.1));
  });
}

TEST(FusedOptimizer, AdamWMatchesTheReference) {
  OptimizerOptions o;
  o.kind = "adamw";
  o.lr = 0.01;
  o.weight_decay = 0.05;
  ExpectSameTrajectory(o, [&](std::vector<torch::Tensor> p) {
    return torch::optim::AdamW(p, torch::optim::AdamWOptions(0.01).weight_decay(0.05));
  });
}

TEST(FusedOptimizer, SgdWithNesterovMomentumMatchesTheReference) {
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 1e-3;
  ExpectSameTrajectory(o, [&](std::vector<torch::Tensor> p) {
    return torch::optim::SGD(p, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-3));
  });
}

TEST(FusedOptimizer, PlainSgdMatchesTheReference) {
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.05;
  ExpectSameTrajectory(o, [&](std::vector<torch::Tensor> p) { return torch::optim::SGD(p, torch::optim::SGDOptions(0.05)); });
}

TEST(FusedOptimizer, UnscalesGradientsAndSkipsTheStepOnInf) {
  OptimizerOptions o;
  o.kind = "adam";
  std::vector<torch::Tensor> scaled = MakeParameters(5), plain = Clone(scaled);
  FusedOptimizer with_scale(scaled, o), without(plain, o);
  SetGradients(scaled, plain, 0);
  for (auto& p : scaled) p.mutable_grad().mul_(1024);
  with_scale.Step(torch::full({}, 1024.0f), torch::zeros({}));
  without.Step();
  EXPECT_LT(MaxDifference(scaled, plain), 1e-6);

  const std::vector<torch::Tensor> before = Clone(scaled);
  SetGradients(scaled, plain, 1);
  with_scale.Step(torch::full({}, 1024.0f), torch::ones({}));
  EXPECT_EQ(MaxDifference(scaled, before), 0.0) << "found_inf skips the update";
  EXPECT_EQ(with_scale.StateTensors()[0].item<float>(), 1.0f) << "and does not count the step";
}

// Dynamic loss scaling often skips the first steps (the scale starts at 2^16). A skipped step
// must leave no trace: momentum starts at the first step taken, as torch.optim's SGD does when
// GradScaler does not call it.
TEST(FusedOptimizer, SgdMomentumStartsAtTheFirstStepTakenWhenTheFirstIsSkipped) {
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 1e-3;
  std::vector<torch::Tensor> fused_params = MakeParameters(7), reference_params = Clone(fused_params);
  FusedOptimizer fused(fused_params, o);
  torch::optim::SGD reference(reference_params, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  SetGradients(fused_params, reference_params, 0);
  const torch::Tensor scale = torch::ones({}), skip = torch::ones({}), take = torch::zeros({});
  {  // Freed blocks of the parameters' sizes, full of NaN: the memory a new buffer is likely given.
    std::vector<torch::Tensor> freed;
    for (int i = 0; i < 16; ++i) {
      for (const auto& p : fused_params) freed.push_back(torch::full_like(p, std::numeric_limits<float>::quiet_NaN()));
    }
  }
  fused.Step(scale, skip);  // skipped (found_inf = 1); the reference never steps
  for (const torch::Tensor& state : fused.StateTensors()) {  // here: momentum buffers, the rest unset
    EXPECT_TRUE(!state.defined() || state.eq(0).all().item<bool>()) << "the skipped step left " << state;
  }
  for (int step = 1; step < 6; ++step) {
    SetGradients(fused_params, reference_params, step);
    fused.Step(scale, take);
    reference.step();
  }
  EXPECT_LT(MaxDifference(fused_params, reference_params), 1e-6);
}

TEST(FusedOptimizer, ZeroGradClearsAndParametersWithoutGradientsAreLeftAlone) {
  std::vector<torch::Tensor> params = MakeParameters(7);
  const torch::Tensor untouched = params[1].detach().clone();
  FusedOptimizer optimizer(params, OptimizerOptions{});
  params[0].mutable_grad() = torch::ones_like(params[0]);
  optimizer.Step();
  EXPECT_TRUE(torch::equal(params[1], untouched));
  optimizer.ZeroGrad();
  EXPECT_FALSE(params[0].grad().defined());
}

TEST(FusedOptimizer, StateRoundTripsAndMismatchesAreRejected) {
  std::vector<torch::Tensor> a = MakeParameters(9), b = Clone(a);
  FusedOptimizer first(a, OptimizerOptions{}), second(b, OptimizerOptions{});
  SetGradients(a, b, 0);
  first.Step();
  second.Step();
  FusedOptimizer restored(Clone(a), OptimizerOptions{});
  restored.LoadStateTensors(first.StateTensors());
  EXPECT_EQ(restored.StateTensors()[0].item<float>(), 1.0f);
  EXPECT_THROW(restored.LoadStateTensors({}), BadInputError);
}

// A learning rate kept in a tensor (what a captured CUDA graph reads) steps exactly as the
// number does, including after set_lr changes it mid-run.
TEST(FusedOptimizer, LearningRateOnTheDeviceStepsAsTheNumberDoes) {
  for (const std::string kind : {"sgd", "adam", "adamw"}) {
    const OptimizerOptions o = OptionsOfKind(kind);
    std::vector<torch::Tensor> on_device = MakeParameters(5), as_number = Clone(on_device);
    FusedOptimizer tensor_lr(on_device, o), number_lr(as_number, o);
    tensor_lr.KeepLrOnDevice();
    for (int step = 0; step < 6; ++step) {
      if (step == 3) {
        tensor_lr.set_lr(0.01);
        number_lr.set_lr(0.01);
      }
      SetGradients(on_device, as_number, step);
      tensor_lr.Step();
      number_lr.Step();
    }
    EXPECT_LT(MaxDifference(on_device, as_number), 1e-7) << kind;
    EXPECT_GT(MaxDifference(on_device, MakeParameters(5)), 1e-3) << kind << ": the parameters moved";
  }
}

// DDP steps the optimizer bucket by bucket (worker/graphed_step.cpp): a step taken in parts is
// the whole step, bit for bit, for every kind, and a part that names no parameter is an error.
TEST(FusedOptimizer, AStepTakenInPartsIsTheWholeStep) {
  for (const std::string kind : {"sgd", "adam", "adamw"}) {
    const OptimizerOptions options = OptionsOfKind(kind, /*weight_decay=*/0.01);
    std::vector<torch::Tensor> whole = MakeParameters(7), parts = Clone(whole);
    FusedOptimizer whole_step(whole, options), in_parts(parts, options);
    for (int step = 0; step < 3; ++step) {
      SetGradients(whole, parts, step);
      whole_step.Step();
      in_parts.StepParameters({2, 0});
      in_parts.StepParameters({1});
    }
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_TRUE(torch::equal(whole[i], parts[i])) << kind << " parameter " << i;
    const auto whole_state = whole_step.StateTensors(), parts_state = in_parts.StateTensors();
    for (size_t i = 0; i < whole_state.size(); ++i) {
      if (whole_state[i].defined()) {
        EXPECT_TRUE(torch::equal(whole_state[i], parts_state[i])) << kind << " state " << i;
      }
    }
    EXPECT_THROW(in_parts.StepParameters({3}), Error) << kind;
  }
}

TEST(FusedOptimizer, RejectsUnknownKindsAndNesterovWithoutMomentum) {
  OptimizerOptions bad;
  bad.kind = "rmsprop";
  EXPECT_THROW(FusedOptimizer(MakeParameters(1), bad), BadInputError);
  OptimizerOptions nesterov;
  nesterov.kind = "sgd";
  nesterov.nesterov = true;
  EXPECT_THROW(FusedOptimizer(MakeParameters(1), nesterov), BadInputError);
}

}  // namespace
}  // namespace mgpu
