// Which rank caused a failed job: the rule `mgpu run` blames by, a pure function of what the
// launcher knows of each rank's end.
//
// When one rank dies, its peers see it as their collectives failing (gloo: "Connection reset by
// peer"; nccl: a remote error; or a collective timeout), and they often report that before the
// launcher sees the dead rank end. So the first failure seen is not always the cause:
//   1. a rank that failed on its own (ended by a signal, or with an error that is not one of its
//      collectives failing for want of a peer) beats a rank that only saw a peer vanish (its
//      Finish report said so: FinishRequest.error_origin PEER);
//   2. among equals, the earliest failure wins (the wall-clock time of the rank's exit, or of its
//      Finish report when that came first);
//   3. among equal times, the lowest rank.
// The supervision loop (launcher/run/run_job.cpp) applies the rule once every rank's fate is known,
// or kSettleWindow after the first failure, whichever comes first.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "launcher/run/job_state.h"

namespace mgpu {

// How long the launcher waits, after a first failure, for the fates of the ranks not yet ended.
// Exits of other nodes' workers arrive with their launcher's next report (at most 1 s apart).
constexpr auto kSettleWindow = std::chrono::milliseconds(3000);

enum class FailureClass {
  kOwn,       // a signal, or an error of the rank's own
  kPeerLost,  // its collective failed because a peer or the connection to it went away
};

struct RankFailure {
  FailureClass failure_class = FailureClass::kOwn;
  int64_t unix_millis = 0;  // when it was first seen to fail
};

// How `view` failed; nullopt while it has not (running, or ended with exit code 0).
std::optional<RankFailure> FailureOf(const RankView& view);

// Whether every rank's end is known: it exited, or it reported its outcome (Finish).
bool EveryFateKnown(const std::vector<RankView>& ranks);

// The rank the rule above blames; nullopt when no rank failed.
std::optional<int> RootCauseRank(const std::vector<RankView>& ranks);

}  // namespace mgpu
