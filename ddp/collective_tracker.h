// The collectives a communicator has started and not yet seen complete, so that a rank can say
// where it is stuck: the heartbeat carries the oldest one ("all-reduce of bucket 2", started
// 12 s ago) to the launcher, whose hang report names it. Thread-safe; cheap enough for every
// collective (a mutex and a map insertion).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace mgpu {

struct PendingCollective {
  std::string what;        // e.g. "all-reduce of bucket 2"
  double seconds = 0;      // since it started
};

class CollectiveTracker {
 public:
  // Marks one collective outstanding until it is destroyed or Done() is called; movable, so a
  // work handle (or a watchdog's list) can own it. May outlive the tracker.
  class Token {
   public:
    Token() = default;
    Token(Token&& other) noexcept;
    Token& operator=(Token&& other) noexcept;
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    ~Token() { Done(); }
    void Done();

   private:
    friend class CollectiveTracker;
    struct State;
    Token(std::shared_ptr<State> state, uint64_t id) : state_(std::move(state)), id_(id) {}
    std::shared_ptr<State> state_;
    uint64_t id_ = 0;
  };

  CollectiveTracker();

  Token Begin(std::string what);
  // The oldest collective still outstanding, or nullopt.
  std::optional<PendingCollective> Oldest() const;

 private:
  std::shared_ptr<Token::State> state_;
};

}  // namespace mgpu
