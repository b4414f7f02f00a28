// Specification of StepTimeline on the CPU (host clock); the CUDA path runs in the gpu tests.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "worker/step_timeline.h"

namespace mgpu {
namespace {

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(StepTimeline, APhaseLastsFromThePreviousMarkToItsOwn) {
  StepTimeline timeline(torch::kCPU);
  timeline.Restart();
  timeline.Mark(StepPhase::kInput);
  Sleep(30);
  timeline.Mark(StepPhase::kForward);
  timeline.Mark(StepPhase::kBackward);
  const PhaseSeconds phases = timeline.Cut().Seconds();
  EXPECT_GE(phases[StepPhase::kForward], 0.030);
  EXPECT_LT(phases[StepPhase::kBackward], phases[StepPhase::kForward]);
  EXPECT_EQ(phases[StepPhase::kOptimizer], 0.0);
}

TEST(StepTimeline, RestartLeavesTheTimeBeforeItOutOfEveryPhase) {
  StepTimeline timeline(torch::kCPU);
  Sleep(30);  // e.g. evaluation between epochs
  timeline.Restart();
  timeline.Mark(StepPhase::kInput);
  const PhaseSeconds phases = timeline.Cut().Seconds();
  double total = 0;
  for (double seconds : phases.seconds) total += seconds;
  EXPECT_LT(total, 0.030);
}

TEST(StepTimeline, AWindowHoldsOnlyTheTimeSinceThePreviousCut) {
  StepTimeline timeline(torch::kCPU);
  Sleep(30);
  timeline.Mark(StepPhase::kOptimizer);
  EXPECT_GE(timeline.Cut().Seconds()[StepPhase::kOptimizer], 0.030);
  timeline.Mark(StepPhase::kOptimizer);
  EXPECT_LT(timeline.Cut().Seconds()[StepPhase::kOptimizer], 0.030);
}

TEST(StepTimeline, AWindowOnTheCpuIsReadyAtOnceAndKeepsItsTimesAfterLaterMarks) {
  StepTimeline timeline(torch::kCPU);
  Sleep(30);
  timeline.Mark(StepPhase::kForward);
  const TimelineWindow window = timeline.Cut();
  Sleep(30);
  timeline.Mark(StepPhase::kForward);
  EXPECT_TRUE(window.Ready());
  EXPECT_GE(window.Seconds()[StepPhase::kForward], 0.030);
  EXPECT_LT(window.Seconds()[StepPhase::kForward], 0.060);
}

TEST(StepTimeline, PhasesHaveTheNamesOfTheSummaryAndMetricsColumns) {
  EXPECT_STREQ(StepPhaseName(StepPhase::kInput), "input");
  EXPECT_STREQ(StepPhaseName(StepPhase::kExposedComm), "exposed_comm");
  EXPECT_STREQ(StepPhaseName(StepPhase::kOptimizer), "optimizer");
}

}  // namespace
}  // namespace mgpu
