// Learning-rate schedules against torch.optim.lr_scheduler.
//
// The golden sequences were generated once with PyTorch 2.11 (torch.optim.lr_scheduler:
// MultiStepLR; SequentialLR of LinearLR(start_factor=1/3, total_iters=2) and
// CosineAnnealingLR(T_max=7, eta_min=0.001) with milestone 3; CosineAnnealingLR(T_max=6);
// ReduceLROnPlateau(factor=0.5, patience=1)), reading param_groups[0]['lr'] before each
// optimizer step (after each scheduler step for the plateau), and pasted here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/status.h"
#include "optim/lr_scheduler.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using testing::BadInputMessage;

void ExpectSameSequence(const std::vector<double>& got, const std::vector<double>& golden) {
  ASSERT_EQ(got.size(), golden.size());
  // PyTorch updates some lrs recursively (lr × gamma, the cosine recurrence); the closed forms
  // agree to rounding.
  for (size_t i = 0; i < golden.size(); ++i) EXPECT_NEAR(got[i], golden[i], 1e-12 * golden[i]) << "at " << i;
}

SchedulerOptions Options(const std::string& kind, double base_lr) {
  SchedulerOptions options;
  options.kind = kind;
  options.base_lr = base_lr;
  return options;
}

TEST(LrScheduler, NoneKeepsTheBaseLr) {
  LrScheduler scheduler(Options("none", 0.02));
  for (int i = 0; i < 5; ++i) scheduler.OnStep();
  scheduler.OnEpochEnd(1.0);
  EXPECT_EQ(scheduler.lr(), 0.02);
}

TEST(LrScheduler, MultistepMatchesPyTorchPerEpoch) {
  SchedulerOptions options = Options("multistep", 0.1);
  options.milestones = {2, 5};
  options.gamma = 0.1;
  LrScheduler scheduler(options);
  std::vector<double> per_epoch;
  for (int epoch = 0; epoch < 8; ++epoch) {
    per_epoch.push_back(scheduler.lr());
    for (int i = 0; i < 3; ++i) scheduler.OnStep();  // steps do not move a per-epoch schedule
    scheduler.OnEpochEnd(1.0);
  }
  ExpectSameSequence(per_epoch, {0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002,
                                 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002});
}

TEST(LrScheduler, CosineWithWarmupMatchesPyTorchPerStep) {
  SchedulerOptions options = Options("cosine", 0.1);
  options.warmup_steps = 3;
  options.min_lr = 0.001;
  options.total_steps = 10;
  LrScheduler scheduler(options);
  std::vector<double> per_step;
  for (int t = 0; t < 10; ++t) {
    per_step.push_back(scheduler.lr());
    scheduler.OnStep();
  }
  ExpectSameSequence(per_step, {0.03333333333333333, 0.06666666666666667, 0.1, 0.1, 0.09509795896116975,
                                0.08136274519200731, 0.061514786230837566, 0.03948521376916245,
                                0.019637254807992697, 0.005902041038830259});
  EXPECT_NEAR(scheduler.lr(), 0.001, 1e-15) << "ends at --min-lr";
}

TEST(LrScheduler, CosineWithoutWarmupMatchesPyTorch) {
  SchedulerOptions options = Options("cosine", 0.05);
  options.total_steps = 6;
  LrScheduler scheduler(options);
  std::vector<double> per_step;
  for (int t = 0; t < 6; ++t) {
    per_step.push_back(scheduler.lr());
    scheduler.OnStep();
  }
  ExpectSameSequence(per_step, {0.05, 0.046650635094610975, 0.037500000000000006, 0.025, 0.012500000000000006,
                                0.0033493649053890325});
}

SchedulerOptions Plateau(double factor, int64_t patience) {
  SchedulerOptions options = Options("plateau", 0.1);
  options.plateau_factor = factor;
  options.plateau_patience = patience;
  return options;
}

TEST(LrScheduler, PlateauMatchesPyTorchIncludingTheRelativeThreshold) {
  LrScheduler scheduler(Plateau(0.5, 1));
  // 0.89992 is not an improvement on 0.9: it is above 0.9 × (1 − 1e-4) = 0.89991.
  const std::vector<double> test_losses = {1.0, 0.9, 0.95, 0.89992, 0.8999, 0.89, 0.95, 0.96, 0.97, 0.98};
  std::vector<double> after_each;
  for (double loss : test_losses) {
    scheduler.OnEpochEnd(loss);
    after_each.push_back(scheduler.lr());
  }
  ExpectSameSequence(after_each, {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.0125});
}

TEST(LrScheduler, PlateauStopsAtMinLr) {
  SchedulerOptions options = Plateau(0.5, 0);
  options.min_lr = 0.04;
  LrScheduler scheduler(options);
  for (int i = 0; i < 5; ++i) scheduler.OnEpochEnd(1.0);
  EXPECT_EQ(scheduler.lr(), 0.04);
}

TEST(LrScheduler, RestoredStateContinuesTheSameSequence) {
  LrScheduler original(Plateau(0.5, 1));
  for (double loss : {1.0, 0.9, 0.95}) original.OnEpochEnd(loss);
  LrScheduler resumed(Plateau(0.5, 1));
  resumed.Restore(original.state());
  for (double loss : {0.96, 0.97, 0.5}) {
    original.OnEpochEnd(loss);
    resumed.OnEpochEnd(loss);
    EXPECT_EQ(resumed.lr(), original.lr());
  }
  EXPECT_EQ(resumed.state().best, 0.5);
}

TEST(LrScheduler, RejectsImpossibleOptionsNamingTheFlag) {
  EXPECT_NE(BadInputMessage([] { LrScheduler s(Options("multistep", 0.1)); }).find("--milestones"),
            std::string::npos);
  SchedulerOptions decreasing = Options("multistep", 0.1);
  decreasing.milestones = {5, 2};
  EXPECT_NE(BadInputMessage([&] { LrScheduler s(decreasing); }).find("increasing"), std::string::npos);
  SchedulerOptions all_warmup = Options("cosine", 0.1);
  all_warmup.warmup_steps = 10;
  all_warmup.total_steps = 10;
  EXPECT_NE(BadInputMessage([&] { LrScheduler s(all_warmup); }).find("--warmup-epochs"), std::string::npos);
  EXPECT_NE(BadInputMessage([] { LrScheduler s(Options("linear", 0.1)); }).find("--scheduler"), std::string::npos);
}

}  // namespace
}  // namespace mgpu
