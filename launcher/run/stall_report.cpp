#include "launcher/run/stall_report.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/status.h"

namespace mgpu {

std::string RankPosition(const RankView& view, SteadyClock::time_point now) {
  std::string where = fmt::format("step {}, epoch {}, {}", view.step, view.epoch, view.phase);
  if (!view.pending_collective.empty()) {
    const double waited = view.pending_collective_seconds + SecondsBetween(view.last_heard, now);
    where += fmt::format(", waiting in {} for {:.1f} s", view.pending_collective, waited);
  }
  return where;
}

JobFailure StalledAt(const std::string& kind, const RankView& root) {
  JobFailure f;
  f.kind = kind;
  f.rank = root.rank;
  f.host = root.host;
  f.pid = root.pid;
  f.exit_code = static_cast<int>(ExitCode::kFailure);
  f.step = root.step;
  f.epoch = root.epoch;
  f.phase = root.phase;
  f.unix_millis = UnixMillis();
  return f;
}

std::optional<JobFailure> HungRanks(const std::vector<RankView>& ranks, double timeout, SteadyClock::time_point started,
                                    SteadyClock::time_point now, const std::string& log_dir) {
  struct Stall {
    const RankView* view;
    double seconds;  // without progress
  };
  std::vector<Stall> running;
  std::string details;
  bool any_past_timeout = false;
  for (const RankView& view : ranks) {
    if (view.exited || view.finished) continue;
    double stalled = 0;
    std::string why;
    if (!view.registered) {
      // Start-up (loading LibTorch, CUDA, a busy machine) may take longer than a heartbeat
      // timeout meant for training; a worker that dies during it is seen by its exit anyway.
      stalled = SecondsBetween(started, now) * timeout / std::max(timeout, kMinStartupSeconds);
      why = fmt::format("has not registered with the coordinator after {:.1f} s (see {}/rank-{}.console.log)",
                        SecondsBetween(started, now), log_dir, view.rank);
    } else {
      const double silent = SecondsBetween(view.last_heard, now);
      const double no_step = view.phase == "training" ? view.seconds_since_progress + silent : 0;
      stalled = std::max(silent, no_step);
      why = silent >= no_step ? fmt::format("silent for {:.1f} s", silent) : fmt::format("no new step for {:.1f} s", no_step);
    }
    details += fmt::format("\n  rank {} ({}): {} — {}", view.rank, view.host.empty() ? "?" : view.host,
                           view.registered ? RankPosition(view, now) : "not started", why);
    running.push_back({&view, stalled});
    any_past_timeout = any_past_timeout || stalled > timeout;
  }
  if (!any_past_timeout) return std::nullopt;
  // At the same step, a rank waiting in a collective is waiting for one that is not: that one is
  // the cause.
  const auto root = std::min_element(running.begin(), running.end(), [](const Stall& a, const Stall& b) {
    if (a.view->step != b.view->step) return a.view->step < b.view->step;
    const bool a_waits = !a.view->pending_collective.empty(), b_waits = !b.view->pending_collective.empty();
    return a_waits != b_waits ? b_waits : a.seconds > b.seconds;
  });
  std::string names;
  for (const Stall& stall : running) {
    if (stall.seconds > timeout || stall.view == root->view) {
      names += (names.empty() ? "" : ", ") + std::to_string(stall.view->rank);
    }
  }
  const RankView& cause = *root->view;
  JobFailure f = StalledAt("hung", cause);
  f.error = "where every running rank is:" + details;
  f.message = fmt::format("rank(s) {} hung (no progress within --heartbeat-timeout {} s); rank {} ({}) stalled first, "
                          "at {}",
                          names, timeout, cause.rank, cause.host.empty() ? "?" : cause.host,
                          cause.registered ? RankPosition(cause, now) : "start-up");
  return f;
}

std::optional<JobFailure> LostNode(const std::vector<NodeView>& nodes, const std::vector<RankView>& ranks, int nproc,
                                   double threshold, double timeout, SteadyClock::time_point now) {
  std::optional<NodeView> lost;
  for (const NodeView& node : nodes) {
    if (!node.joined || SecondsBetween(node.last_heard, now) <= threshold) continue;
    if (!lost || node.last_heard < lost->last_heard) lost = node;
  }
  if (!lost) return std::nullopt;
  const int first_rank = lost->node_rank * nproc;
  const RankView& root = ranks.at(static_cast<size_t>(first_rank));
  JobFailure f = StalledAt("node-lost", root);
  f.host = lost->host;
  const std::string which = nproc == 1 ? fmt::format("rank {}", first_rank)
                                       : fmt::format("ranks {} to {}", first_rank, first_rank + nproc - 1);
  f.message = fmt::format("node {} (host {}) lost: its launcher has not reported for {:.1f} s "
                          "(--heartbeat-timeout {} s); its {} stopped at {} (network cut, host down, or its "
                          "mgpu run killed)",
                          lost->node_rank, lost->host.empty() ? "?" : lost->host, SecondsBetween(lost->last_heard, now),
                          timeout, which, root.registered ? RankPosition(root, now) : "start-up");
  return f;
}

std::optional<JobFailure> AbsentNodes(const std::vector<NodeView>& nodes, const std::vector<RankView>& ranks, int nproc,
                                      double timeout, SteadyClock::time_point started, SteadyClock::time_point now,
                                      const std::string& coordinator) {
  if (SecondsBetween(started, now) <= timeout) return std::nullopt;
  std::vector<int> absent;
  for (const NodeView& node : nodes) {
    if (!node.joined) absent.push_back(node.node_rank);
  }
  if (absent.empty()) return std::nullopt;
  JobFailure f = StalledAt("node-absent", ranks.at(static_cast<size_t>(absent.front() * nproc)));
  const std::string which = fmt::format("{}", fmt::join(absent, ", "));
  f.message = fmt::format("node(s) {} never joined: no `mgpu run --node-rank {}` reached the coordinator at {} within "
                          "--heartbeat-timeout {} s. Start it on that host with the same --nnodes, --master-addr, "
                          "--master-port and token, and check that the host reaches {} (name resolution, firewall)",
                          which, absent.front(), coordinator, timeout, coordinator);
  return f;
}

}  // namespace mgpu
