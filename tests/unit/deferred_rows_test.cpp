// Specification of DeferredRows on the CPU, where a row is complete when added; the GPU path
// (a row completes once the device has passed it) is in tests/gpu/cuda_training_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <thread>

#include "worker/deferred_rows.h"

namespace mgpu {
namespace {

torch::Tensor Scalar(double value) { return torch::tensor(value, torch::kFloat); }

DeferredRows::HostPart Host(int64_t step, int64_t steps, int64_t images) {
  DeferredRows::HostPart host;
  host.metrics.step = step;
  host.metrics.lr = 0.1;
  host.metrics.data_wait_seconds = 0.5;
  host.steps = steps;
  host.images = images;
  return host;
}

// A window whose optimizer phase lasted at least `ms`.
TimelineWindow WindowOf(StepTimeline& timeline, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  timeline.Mark(StepPhase::kOptimizer);
  return timeline.Cut();
}

TEST(DeferredRows, ARowTakesItsTimesFromItsWindowAndItsValuesFromTheDevice) {
  StepTimeline timeline(torch::kCPU);
  DeferredRows rows(torch::kCPU);
  TimelineWindow window = WindowOf(timeline, 40);
  const double seconds = window.Seconds()[StepPhase::kOptimizer];
  rows.Add(Host(4, 4, 128), Scalar(2.5), Scalar(1024), std::move(window), {});
  const auto done = rows.Take(/*wait=*/false);
  ASSERT_EQ(done.size(), 1u);
  const StepMetrics& m = done[0].metrics;
  EXPECT_EQ(m.step, 4);
  EXPECT_EQ(m.loss, 2.5);
  EXPECT_EQ(m.loss_scale, 1024);
  EXPECT_EQ(m.lr, 0.1);
  EXPECT_EQ(m.data_wait_seconds, 0.5);
  EXPECT_DOUBLE_EQ(m.step_seconds, seconds / 4);
  EXPECT_DOUBLE_EQ(m.phase_seconds[StepPhase::kOptimizer], seconds / 4);
  EXPECT_DOUBLE_EQ(m.images_per_second, 128 / seconds);
  EXPECT_DOUBLE_EQ(done[0].window_seconds[StepPhase::kOptimizer], seconds);
  EXPECT_FALSE(done[0].nonfinite);
  EXPECT_TRUE(rows.Take(/*wait=*/true).empty()) << "a row is taken once";
}

TEST(DeferredRows, RowsComeOutInTheOrderTheyWereAdded) {
  StepTimeline timeline(torch::kCPU);
  DeferredRows rows(torch::kCPU);
  for (int64_t step : {5, 10, 15}) rows.Add(Host(step, 5, 10), Scalar(1), Scalar(1), WindowOf(timeline, 1), {});
  const auto done = rows.Take(/*wait=*/true);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].metrics.step, 5);
  EXPECT_EQ(done[2].metrics.step, 15);
}

TEST(DeferredRows, AWindowWithANonFiniteLossNamesItsFirstOne) {
  StepTimeline timeline(torch::kCPU);
  DeferredRows rows(torch::kCPU);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  WindowLosses losses{{Scalar(1.0), Scalar(nan), Scalar(std::numeric_limits<double>::infinity())},
                      {7, 8, 9},
                      {Scalar(256), Scalar(128), Scalar(64)}};
  rows.Add(Host(9, 3, 96), Scalar(nan), Scalar(64), WindowOf(timeline, 1), std::move(losses));
  const auto done = rows.Take(/*wait=*/false);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].nonfinite);
  EXPECT_EQ(done[0].nonfinite->step, 8);
  EXPECT_TRUE(std::isnan(done[0].nonfinite->loss));
  EXPECT_EQ(done[0].nonfinite->loss_scale, 128);
}

TEST(DeferredRows, FiniteOrNoLossesAreNotReported) {
  EXPECT_FALSE(FirstNonFiniteLoss({}));
  EXPECT_FALSE(FirstNonFiniteLoss(WindowLosses{{Scalar(1.0), Scalar(2.0)}, {1, 2}, {}}));
  const auto bad = FirstNonFiniteLoss(WindowLosses{{Scalar(1.0), Scalar(-INFINITY)}, {1, 2}, {}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->step, 2);
  EXPECT_EQ(bad->loss_scale, 1.0) << "no loss scaling: scale 1";
}

}  // namespace
}  // namespace mgpu
