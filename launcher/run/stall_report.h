// Stall verdicts of `mgpu run`'s supervision: from the ranks' and nodes' last reports (JobState
// snapshots), whether a job stopped making progress, and which rank or node the others wait for.
// Pure functions of the snapshots and `now`, so each verdict can be tested without processes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/run/job_state.h"
#include "launcher/run/job_summary.h"

namespace mgpu {

// A worker has at least this long to register before start-up counts as a stall.
constexpr double kMinStartupSeconds = 60;

// Where a registered rank last said it was: "step S, epoch E, PHASE", plus ", waiting in
// COLLECTIVE for T s" while a collective it started has not completed.
std::string RankPosition(const RankView& view, SteadyClock::time_point now);

// A job stopped for want of progress (`kind` "hung", "node-lost" or "node-absent"), with `root` as its cause, at
// the position it last reported.
JobFailure StalledAt(const std::string& kind, const RankView& root);

// nullopt while every running rank made progress within `timeout` seconds (registered, reported,
// and, while training, completed a step). Otherwise the "hung" report: the ranks past the timeout,
// every running rank's position (its `error`), and as root cause the rank the others wait for:
// the lowest step, then not waiting in a collective, then the longest stall, chosen among all
// running ranks. (Ranks leave a collective together, so the one that waits in the next collective
// can pass the timeout a moment before the one it waits for.) `started`: when this attempt's
// workers were started; `log_dir` is named for ranks that never registered.
std::optional<JobFailure> HungRanks(const std::vector<RankView>& ranks, double timeout, SteadyClock::time_point started,
                                    SteadyClock::time_point now, const std::string& log_dir);

// The joined node whose launcher has been silent longest, when that is more than `threshold`
// seconds: its host is unreachable or its launcher died, and its `nproc` ranks with it.
std::optional<JobFailure> LostNode(const std::vector<NodeView>& nodes, const std::vector<RankView>& ranks, int nproc,
                                   double threshold, double timeout, SteadyClock::time_point now);

// The nodes that have not joined `timeout` seconds after `started` (the attempt's start): no
// `mgpu run --node-rank K` reached the coordinator at `coordinator` (node 0 waits for the others
// as long as they wait for it). Kind "node-absent", root cause the first absent node's first rank,
// its message naming every absent node, the address, and what to check.
std::optional<JobFailure> AbsentNodes(const std::vector<NodeView>& nodes, const std::vector<RankView>& ranks, int nproc,
                                      double timeout, SteadyClock::time_point started, SteadyClock::time_point now,
                                      const std::string& coordinator);

}  // namespace mgpu
