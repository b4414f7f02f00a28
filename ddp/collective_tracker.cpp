#include "ddp/collective_tracker.h"

namespace mgpu {

using Clock = std::chrono::steady_clock;

struct CollectiveTracker::Token::State {
  std::mutex mutex;
  uint64_t next_id = 1;
  // Ids increase with start time, so the first entry is the oldest.
  std::map<uint64_t, std::pair<std::string, Clock::time_point>> pending;
};

CollectiveTracker::Token::Token(Token&& other) noexcept : state_(std::move(other.state_)), id_(other.id_) {}

CollectiveTracker::Token& CollectiveTracker::Token::operator=(Token&& other) noexcept {
  if (this != &other) {
    Done();
    state_ = std::move(other.state_);
    id_ = other.id_;
  }
  return *this;
}

void CollectiveTracker::Token::Done() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->pending.erase(id_);
  }
  state_.reset();
}

CollectiveTracker::CollectiveTracker() : state_(std::make_shared<Token::State>()) {}

CollectiveTracker::Token CollectiveTracker::Begin(std::string what) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const uint64_t id = state_->next_id++;
  state_->pending.emplace(id, std::make_pair(std::move(what), Clock::now()));
  return Token(state_, id);
}

std::optional<PendingCollective> CollectiveTracker::Oldest() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->pending.empty()) return std::nullopt;
  const auto& [what, started] = state_->pending.begin()->second;
  return PendingCollective{what, std::chrono::duration<double>(Clock::now() - started).count()};
}

}  // namespace mgpu
