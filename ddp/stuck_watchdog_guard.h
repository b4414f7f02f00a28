// The last resort behind a collective watchdog (nccl_communicator.cpp): a thread that makes no
// CUDA or NCCL call of its own and ends the process when the watchdog itself has stopped coming
// back while a collective is overdue. The watchdog queries CUDA events and, on a timeout, aborts
// the communicator; either call can block when a peer has stopped and this rank's device queue is
// full of work that waits on it. Then neither the training thread nor the watchdog can report the
// stuck collective, and without this guard the process would wait forever. A graphed DDP rank hung
// that way on 2x H100 (2026-11-27): the guard ended it in 6 runs of 6, each time 20-30 s after the
// watchdog's last pass, until LaunchWatched bounded the replays in flight (communicator.h); then
// the rank ended at the watchdog's own timeout in 3 runs of 3.
//
// The watchdog calls Beat at every pass with the oldest outstanding collective; Check, which the
// guard's thread runs, says what to report once that collective's deadline and then kStuckGrace
// have passed with no Beat since kStuckGrace. Beat and Check take the time, so tests drive them.
// The communicator's destructor stops the watchdog and then calls EnterTeardown: the guard goes on
// with the same deadline and grace (so a teardown with nothing outstanding stays unbounded, as
// NCCL's own), and a report then blames the teardown that has not returned, not the watchdog.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace mgpu {

class StuckWatchdogGuard {
 public:
  using Clock = std::chrono::steady_clock;
  // Longer than the watchdog's own wait between aborting the communicator and ending the process
  // (10 s), so that a watchdog that is merely waiting there is not taken for a stuck one.
  static constexpr std::chrono::seconds kStuckGrace{15};

  struct Outstanding {
    std::string context;       // the collective, as the watchdog's own timeout message names it
    Clock::time_point deadline;
    std::chrono::milliseconds timeout;
  };

  // `on_stuck` receives Check's report; by default it prints it and ends the process (exit code 1).
  // With `start_thread` false no thread runs (tests call Check themselves).
  explicit StuckWatchdogGuard(std::function<void(const std::string&)> on_stuck = nullptr, bool start_thread = true);
  ~StuckWatchdogGuard();
  StuckWatchdogGuard(const StuckWatchdogGuard&) = delete;
  StuckWatchdogGuard& operator=(const StuckWatchdogGuard&) = delete;

  // The watchdog is alive at `now`, and `oldest` is the oldest collective not yet seen complete.
  void Beat(std::optional<Outstanding> oldest, Clock::time_point now = Clock::now());
  // The watchdog has stopped at `now` because the communicator is being torn down (its last Beat
  // stands); a later report names the teardown.
  void EnterTeardown(Clock::time_point now = Clock::now());
  // The report when the watchdog, or the teardown after it, is stuck at `now` (see the header
  // comment), else nullopt.
  std::optional<std::string> Check(Clock::time_point now = Clock::now()) const;

 private:
  void Run();

  std::function<void(const std::string&)> on_stuck_;
  mutable std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::optional<Clock::time_point> last_beat_;
  std::optional<Outstanding> oldest_;
  std::optional<Clock::time_point> teardown_since_;
  std::thread thread_;
};

}  // namespace mgpu
