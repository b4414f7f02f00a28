// Specification of StuckWatchdogGuard (ddp/stuck_watchdog_guard.h): the process ends only when the
// collective watchdog has gone silent past an overdue collective's deadline, and says which.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "ddp/stuck_watchdog_guard.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = StuckWatchdogGuard::Clock;
constexpr auto kGrace = StuckWatchdogGuard::kStuckGrace;

StuckWatchdogGuard::Outstanding Replay(Clock::time_point deadline) {
  return {"the replayed CUDA graph of a DDP step (2 bucket all-reduces) on rank 0", deadline, milliseconds(5000)};
}

TEST(StuckWatchdogGuard, StaysQuietWhileTheWatchdogBeatsEvenPastADeadline) {
  StuckWatchdogGuard guard([](const std::string&) { FAIL() << "no thread runs"; }, /*start_thread=*/false);
  const auto t0 = Clock::now();
  for (int s = 0; s < 120; ++s) guard.Beat(Replay(t0), t0 + seconds(s));  // the watchdog reports this one itself
  EXPECT_FALSE(guard.Check(t0 + seconds(120)).has_value());
}

TEST(StuckWatchdogGuard, StaysQuietWithNothingOutstandingHoweverLongTheSilence) {
  StuckWatchdogGuard guard(nullptr, /*start_thread=*/false);
  const auto t0 = Clock::now();
  EXPECT_FALSE(guard.Check(t0 + seconds(600)).has_value()) << "before the first beat";
  guard.Beat(std::nullopt, t0);
  EXPECT_FALSE(guard.Check(t0 + seconds(600)).has_value());
}

TEST(StuckWatchdogGuard, ReportsASilentWatchdogOnlyOnceTheGracePassedBothTheBeatAndTheDeadline) {
  StuckWatchdogGuard guard(nullptr, /*start_thread=*/false);
  const auto t0 = Clock::now();
  guard.Beat(Replay(t0 + seconds(5)), t0);  // a replay launched at t0 with a 5 s timeout, then silence
  EXPECT_FALSE(guard.Check(t0 + seconds(5) + kGrace).has_value()) << "the deadline passed only kGrace ago";
  const auto report = guard.Check(t0 + seconds(6) + kGrace);
  ASSERT_TRUE(report.has_value());
  EXPECT_NE(report->find("the replayed CUDA graph of a DDP step"), std::string::npos) << *report;
  EXPECT_NE(report->find("did not complete within 5 s"), std::string::npos) << *report;
  EXPECT_NE(report->find("for 21 s"), std::string::npos) << *report;

  guard.Beat(Replay(t0 + seconds(5)), t0 + seconds(6) + kGrace);  // the watchdog came back
  EXPECT_FALSE(guard.Check(t0 + seconds(7) + kGrace).has_value());
}

// After the communicator stops its watchdog to tear down, the same deadline and grace apply, and a
// report names the teardown that has not returned instead of a silent watchdog.
TEST(StuckWatchdogGuard, InTeardownReportsTheTeardownOnTheSameClock) {
  StuckWatchdogGuard guard(nullptr, /*start_thread=*/false);
  const auto t0 = Clock::now();
  guard.Beat(Replay(t0 + seconds(5)), t0);
  guard.EnterTeardown(t0 + seconds(1));
  EXPECT_FALSE(guard.Check(t0 + seconds(5) + kGrace).has_value()) << "the deadline passed only kGrace ago";
  const auto report = guard.Check(t0 + seconds(6) + kGrace);
  ASSERT_TRUE(report.has_value());
  EXPECT_NE(report->find("the replayed CUDA graph of a DDP step"), std::string::npos) << *report;
  EXPECT_NE(report->find("teardown (NCCL's destroy or abort) has not returned for 20 s"), std::string::npos) << *report;
  EXPECT_EQ(report->find("watchdog"), std::string::npos) << "the watchdog was stopped, not stuck: " << *report;
}

TEST(StuckWatchdogGuard, InTeardownWithNothingOutstandingStaysQuiet) {
  StuckWatchdogGuard guard(nullptr, /*start_thread=*/false);
  const auto t0 = Clock::now();
  guard.Beat(std::nullopt, t0);
  guard.EnterTeardown(t0);
  EXPECT_FALSE(guard.Check(t0 + seconds(600)).has_value()) << "NCCL's own teardown is not bounded here";
}

// The guard's own thread: a watchdog silent since long ago, past its oldest collective's deadline,
// is reported within the thread's checks (once a second).
TEST(StuckWatchdogGuard, ItsThreadReportsAStuckWatchdog) {
  std::atomic<int> reports{0};
  std::string report;
  std::mutex report_mutex;
  StuckWatchdogGuard guard([&](const std::string& text) {
    std::lock_guard<std::mutex> lock(report_mutex);
    report = text;
    ++reports;
  });
  const auto now = Clock::now();
  guard.Beat(Replay(now - seconds(60)), now - seconds(30));
  ASSERT_TRUE(testing::WaitFor([&] { return reports.load() > 0; }, 30)) << "no report within 30 s";
  std::lock_guard<std::mutex> lock(report_mutex);
  EXPECT_EQ(reports.load(), 1);
  EXPECT_NE(report.find("exiting instead of waiting forever"), std::string::npos) << report;
}

}  // namespace
}  // namespace mgpu
