// The rule `mgpu run` blames a rank by (launcher/run/root_cause.h): a rank that failed on its own (a
// signal, an error of its own) beats the ranks that only saw a peer vanish, whatever the order
// in which the launcher heard of them; among equals the earliest wins, then the lowest rank.
#include <gtest/gtest.h>

#include <csignal>

#include "launcher/run/root_cause.h"

namespace mgpu {
namespace {

RankView Running(int rank) {
  RankView view;
  view.rank = rank;
  view.registered = true;
  view.phase = "training";
  return view;
}

// Its parent saw it end by `signal` at `unix_millis`, with no report of its own.
RankView Killed(int rank, int signal, int64_t unix_millis) {
  RankView view = Running(rank);
  view.exited = true;
  view.exit.set_rank(rank);
  view.exit.set_exit_code(-1);
  view.exit.set_signal(signal);
  view.exit.set_unix_millis(unix_millis);
  return view;
}

// It exited with `exit_code` at `unix_millis` without reporting an outcome.
RankView Exited(int rank, int exit_code, int64_t unix_millis) {
  RankView view = Running(rank);
  view.exited = true;
  view.exit.set_rank(rank);
  view.exit.set_exit_code(exit_code);
  view.exit.set_unix_millis(unix_millis);
  return view;
}

// It reported `exit_code` and an error of `origin` at `unix_millis` (Finish), and is still exiting.
RankView Reported(int rank, int exit_code, coordinator::ErrorOrigin origin, int64_t unix_millis) {
  RankView view = Running(rank);
  view.finished = true;
  view.finish.set_rank(rank);
  view.finish.set_exit_code(exit_code);
  view.finish.set_error(exit_code == 0 ? "" : "an error");
  view.finish.set_error_origin(origin);
  view.finish_unix_millis = unix_millis;
  return view;
}

constexpr auto kPeer = coordinator::ERROR_ORIGIN_PEER;
constexpr auto kOwn = coordinator::ERROR_ORIGIN_THIS_RANK;

struct Case {
  const char* name;
  std::vector<RankView> ranks;
  std::optional<int> blamed;
};

TEST(RootCause, BlamesByTheRuleNotByWhoReportedFirst) {
  const std::vector<Case> cases = {
      {"SIGKILL of rank 1 beats rank 0's collective error reported earlier",
       {Reported(0, 1, kPeer, 1000), Killed(1, SIGKILL, 1005)}, 1},
      {"...also once rank 0 has exited after its report",
       {[] {
          RankView view = Reported(0, 1, kPeer, 1000);
          view.exited = true;
          view.exit.set_exit_code(1);
          view.exit.set_unix_millis(1001);
          return view;
        }(),
        Killed(1, SIGKILL, 1005)},
       1},
      {"two errors of their own: the earliest", {Exited(0, 1, 1010), Reported(1, 1, kOwn, 1003)}, 1},
      {"only peer errors: the earliest", {Reported(0, 1, kPeer, 1004), Reported(1, 1, kPeer, 1002), Running(2)}, 1},
      {"bad input (exit 2) beats an earlier peer error", {Reported(0, 1, kPeer, 1001), Reported(2, 2, kOwn, 1009)}, 2},
      {"divergence (exit 3) beats an earlier peer error", {Reported(0, 3, kOwn, 1050), Reported(1, 1, kPeer, 1001)}, 0},
      {"an exit with a code and no report counts as its own", {Reported(0, 1, kPeer, 1000), Exited(1, 1, 1500)}, 1},
      {"a signal and an own error: the earliest", {Killed(0, SIGSEGV, 1200), Reported(1, 2, kOwn, 1100)}, 1},
      {"equal times: the lowest rank", {Running(0), Killed(2, SIGKILL, 1000), Killed(1, SIGKILL, 1000)}, 1},
      {"an unsaid origin counts as its own",
       {Reported(0, 1, kPeer, 1000), Reported(1, 1, coordinator::ERROR_ORIGIN_UNSPECIFIED, 1001)},
       1},
      {"nobody failed", {Running(0), Reported(1, 0, coordinator::ERROR_ORIGIN_UNSPECIFIED, 1000), Exited(2, 0, 1001)},
       std::nullopt},
  };
  for (const Case& c : cases) EXPECT_EQ(RootCauseRank(c.ranks), c.blamed) << c.name;
}

TEST(RootCause, ClassifiesAFailureAndDatesItByItsFirstSign) {
  EXPECT_FALSE(FailureOf(Running(0)).has_value());
  EXPECT_FALSE(FailureOf(Exited(0, 0, 1000)).has_value());

  const std::optional<RankFailure> peer = FailureOf(Reported(0, 1, kPeer, 1000));
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->failure_class, FailureClass::kPeerLost);
  EXPECT_EQ(peer->unix_millis, 1000);

  RankView reported_then_exited = Reported(1, 2, kOwn, 2000);
  reported_then_exited.exited = true;
  reported_then_exited.exit.set_exit_code(2);
  reported_then_exited.exit.set_unix_millis(2040);
  const std::optional<RankFailure> own = FailureOf(reported_then_exited);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->failure_class, FailureClass::kOwn);
  EXPECT_EQ(own->unix_millis, 2000) << "the report came first";
  EXPECT_EQ(FailureOf(Killed(2, SIGKILL, 3000))->failure_class, FailureClass::kOwn);
}

TEST(RootCause, EveryFateIsKnownOnceEachRankExitedOrReported) {
  EXPECT_TRUE(EveryFateKnown({Killed(0, SIGKILL, 1000), Reported(1, 1, kPeer, 999)}));
  EXPECT_FALSE(EveryFateKnown({Killed(0, SIGKILL, 1000), Running(1)}));
  EXPECT_TRUE(EveryFateKnown({}));
}

}  // namespace
}  // namespace mgpu
