// `mgpu run`'s stall verdicts from the ranks' last reports: nothing while every rank progresses
// within the timeout; once one does not, the rank the others wait for is the root cause, even
// when the rank waiting in a collective passes the timeout first; ranks that never registered
// get the start-up grace; a silent node is reported with its ranks; a node that never joined is
// named, with the coordinator's address, once the heartbeat timeout has passed.
#include <gtest/gtest.h>

#include "launcher/run/stall_report.h"

namespace mgpu {
namespace {

using std::chrono::milliseconds;

const SteadyClock::time_point kNow = SteadyClock::now();
constexpr double kTimeout = 3;

SteadyClock::time_point SecondsAgo(double seconds) {
  return kNow - milliseconds(static_cast<int64_t>(seconds * 1000));
}

// A registered rank training at `step`, heard from just now, with no step for `stalled` seconds.
RankView Training(int rank, int64_t step, double stalled, const std::string& collective = "") {
  RankView view;
  view.rank = rank;
  view.registered = true;
  view.host = "node-a";
  view.pid = 100 + rank;
  view.last_heard = kNow;
  view.step = step;
  view.phase = "training";
  view.seconds_since_progress = stalled;
  view.pending_collective = collective;
  view.pending_collective_seconds = collective.empty() ? 0 : stalled;
  return view;
}

TEST(StallReport, NothingWhileEveryRankProgressesWithinTheTimeout) {
  EXPECT_FALSE(HungRanks({Training(0, 7, 0.4), Training(1, 7, 2.9, "all-reduce of gradient bucket 0")}, kTimeout,
                         SecondsAgo(100), kNow, "logs"));
}

TEST(StallReport, TheRankOthersWaitForIsTheCauseEvenBeforeItPassesTheTimeout) {
  // Both left step 3's all-reduce together; rank 0 counted its step a moment earlier and now waits
  // in step 4's all-reduce for rank 1, which stopped.
  const auto hung = HungRanks({Training(0, 3, 3.2, "all-reduce of gradient bucket 1 of 2 (4096 bytes)"),
                               Training(1, 3, 2.9)},
                              kTimeout, SecondsAgo(100), kNow, "logs");
  ASSERT_TRUE(hung);
  EXPECT_EQ(hung->kind, "hung");
  EXPECT_EQ(hung->rank, 1);
  EXPECT_EQ(hung->step, 3);
  EXPECT_NE(hung->message.find("rank(s) 0, 1 hung"), std::string::npos) << hung->message;
  EXPECT_NE(hung->message.find("rank 1 (node-a) stalled first, at step 3, epoch 0, training"), std::string::npos)
      << hung->message;
  EXPECT_NE(hung->error.find("rank 0 (node-a): step 3, epoch 0, training, waiting in all-reduce of gradient bucket 1"),
            std::string::npos)
      << hung->error;
}

TEST(StallReport, TheLowestStepIsTheCauseThenTheLongestStall) {
  const auto behind = HungRanks({Training(0, 9, 5), Training(1, 8, 1), Training(2, 9, 6)}, kTimeout, SecondsAgo(100),
                                kNow, "logs");
  ASSERT_TRUE(behind);
  EXPECT_EQ(behind->rank, 1);
  const auto longest = HungRanks({Training(0, 9, 5), Training(1, 9, 7)}, kTimeout, SecondsAgo(100), kNow, "logs");
  ASSERT_TRUE(longest);
  EXPECT_EQ(longest->rank, 1);
}

TEST(StallReport, ASilentRankCountsFromItsLastReport) {
  RankView silent = Training(1, 4, 0);
  silent.last_heard = SecondsAgo(4);
  silent.phase = "evaluating";
  const auto hung = HungRanks({Training(0, 4, 0.1), silent}, kTimeout, SecondsAgo(100), kNow, "logs");
  ASSERT_TRUE(hung);
  EXPECT_EQ(hung->rank, 1);
  EXPECT_NE(hung->error.find("silent for 4.0 s"), std::string::npos) << hung->error;
}

TEST(StallReport, FinishedAndExitedRanksAreNotStalls) {
  RankView finished = Training(0, 10, 50);
  finished.finished = true;
  RankView exited = Training(1, 10, 50);
  exited.exited = true;
  EXPECT_FALSE(HungRanks({finished, exited}, kTimeout, SecondsAgo(100), kNow, "logs"));
}

TEST(StallReport, AnUnregisteredRankHasTheStartUpGraceThenNamesItsConsoleLog) {
  RankView absent;
  absent.rank = 1;
  const std::vector<RankView> ranks = {Training(0, 0, 0), absent};
  EXPECT_FALSE(HungRanks(ranks, kTimeout, SecondsAgo(kMinStartupSeconds - 1), kNow, "out/logs"))
      << "start-up gets at least kMinStartupSeconds, not the heartbeat timeout";
  const auto hung = HungRanks(ranks, kTimeout, SecondsAgo(kMinStartupSeconds + 1), kNow, "out/logs");
  ASSERT_TRUE(hung);
  EXPECT_EQ(hung->rank, 1);
  EXPECT_NE(hung->message.find("at start-up"), std::string::npos) << hung->message;
  EXPECT_NE(hung->error.find("out/logs/rank-1.console.log"), std::string::npos) << hung->error;
}

TEST(StallReport, ASilentNodeIsLostWithItsRanks) {
  NodeView quiet{1, true, "node-b", SecondsAgo(5)};
  NodeView talking{2, true, "node-c", SecondsAgo(0.5)};
  const std::vector<RankView> ranks = {Training(0, 2, 0), Training(1, 2, 0), Training(2, 2, 0), Training(3, 2, 0),
                                       Training(4, 2, 0), Training(5, 2, 0)};
  EXPECT_FALSE(LostNode({quiet, talking}, ranks, 2, 6, kTimeout, kNow));
  const auto lost = LostNode({quiet, talking}, ranks, 2, kTimeout, kTimeout, kNow);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->kind, "node-lost");
  EXPECT_EQ(lost->rank, 2);
  EXPECT_EQ(lost->host, "node-b");
  EXPECT_NE(lost->message.find("node 1 (host node-b) lost"), std::string::npos) << lost->message;
  EXPECT_NE(lost->message.find("its ranks 2 to 3 stopped at step 2"), std::string::npos) << lost->message;
}

TEST(StallReport, ANodeThatNeverJoinedIsNamedWithTheAddressItShouldReach) {
  NodeView joined{1, true, "node-b", SecondsAgo(0.5)};
  NodeView absent{2, false, "", SecondsAgo(100)};
  RankView unregistered;
  unregistered.rank = 2;
  const std::vector<RankView> ranks = {Training(0, 0, 0), Training(1, 0, 0), unregistered};
  EXPECT_FALSE(AbsentNodes({joined, absent}, ranks, 1, kTimeout, SecondsAgo(kTimeout - 1), kNow, "node0:29501"))
      << "node 0 waits for the others as long as they wait for it";
  EXPECT_FALSE(AbsentNodes({joined}, ranks, 1, kTimeout, SecondsAgo(100), kNow, "node0:29501"));
  const auto verdict = AbsentNodes({joined, absent}, ranks, 1, kTimeout, SecondsAgo(kTimeout + 1), kNow, "node0:29501");
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->kind, "node-absent");
  EXPECT_EQ(verdict->rank, 2);
  EXPECT_NE(verdict->message.find("node(s) 2 never joined"), std::string::npos) << verdict->message;
  EXPECT_NE(verdict->message.find("mgpu run --node-rank 2"), std::string::npos) << verdict->message;
  EXPECT_NE(verdict->message.find("reaches node0:29501"), std::string::npos) << verdict->message;
}

}  // namespace
}  // namespace mgpu
