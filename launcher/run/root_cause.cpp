#include "launcher/run/root_cause.h"

#include <algorithm>
#include <tuple>

namespace mgpu {

std::optional<RankFailure> FailureOf(const RankView& view) {
  const bool failed_exit = view.exited && (view.exit.exit_code() != 0 || view.exit.signal() != 0);
  const bool failed_finish = view.finished && view.finish.exit_code() != 0;
  if (!failed_exit && !failed_finish) return std::nullopt;
  RankFailure failure;
  failure.unix_millis = failed_exit ? view.exit.unix_millis() : view.finish_unix_millis;
  if (failed_finish) failure.unix_millis = std::min(failure.unix_millis, view.finish_unix_millis);
  // A rank that reported a peer's vanishing failed because of it, however its process ended
  // afterwards; a signal or an exit without that report is its own.
  const bool saw_peer_vanish = failed_finish && view.finish.error_origin() == coordinator::ERROR_ORIGIN_PEER;
  failure.failure_class = saw_peer_vanish ? FailureClass::kPeerLost : FailureClass::kOwn;
  return failure;
}

bool EveryFateKnown(const std::vector<RankView>& ranks) {
  return std::all_of(ranks.begin(), ranks.end(), [](const RankView& view) { return view.exited || view.finished; });
}

std::optional<int> RootCauseRank(const std::vector<RankView>& ranks) {
  std::optional<int> cause;
  std::tuple<bool, int64_t, int> best{};  // (saw a peer vanish, time, rank): smaller is blamed first
  for (const RankView& view : ranks) {
    const std::optional<RankFailure> failure = FailureOf(view);
    if (!failure) continue;
    const std::tuple<bool, int64_t, int> key{failure->failure_class == FailureClass::kPeerLost, failure->unix_millis,
                                             view.rank};
    if (!cause || key < best) {
      cause = view.rank;
      best = key;
    }
  }
  return cause;
}

}  // namespace mgpu
