#include "ddp/stuck_watchdog_guard.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace mgpu {
namespace {

constexpr std::chrono::seconds kCheckEvery{1};

void ReportAndExit(const std::string& report) {
  std::fprintf(stderr, "mgpu-worker: %s\n", report.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

StuckWatchdogGuard::StuckWatchdogGuard(std::function<void(const std::string&)> on_stuck, bool start_thread)
    : on_stuck_(on_stuck ? std::move(on_stuck) : ReportAndExit) {
  if (start_thread) thread_ = std::thread([this] { Run(); });
}

StuckWatchdogGuard::~StuckWatchdogGuard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StuckWatchdogGuard::Beat(std::optional<Outstanding> oldest, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_beat_ = now;
  oldest_ = std::move(oldest);
}

void StuckWatchdogGuard::EnterTeardown(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  teardown_since_ = now;
}

std::optional<std::string> StuckWatchdogGuard::Check(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!last_beat_ || !oldest_ || now - *last_beat_ <= kStuckGrace || now - oldest_->deadline <= kStuckGrace) {
    return std::nullopt;
  }
  if (teardown_since_) {
    const auto waiting = std::chrono::duration_cast<std::chrono::seconds>(now - *teardown_since_).count();
    return fmt::format("{} did not complete within {} s, and this rank's communicator teardown (NCCL's destroy or "
                       "abort) has not returned for {} s (a rank has stopped and this rank's device queue waits on "
                       "it); exiting instead of waiting forever",
                       oldest_->context, oldest_->timeout.count() / 1000, waiting);
  }
  const auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - *last_beat_).count();
  return fmt::format("{} did not complete within {} s, and the watchdog that aborts a stuck communicator has not "
                     "come back from a CUDA or NCCL call for {} s (a rank has stopped and this rank's device queue "
                     "waits on it); exiting instead of waiting forever",
                     oldest_->context, oldest_->timeout.count() / 1000, silent);
}

void StuckWatchdogGuard::Run() {
  pthread_setname_np(pthread_self(), "mgpu-wd-guard");  // names it in top -H and /proc/PID/task
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.wait_for(lock, kCheckEvery, [this] { return stopping_; })) {
    lock.unlock();
    if (const auto report = Check()) {
      on_stuck_(*report);
      return;
    }
    lock.lock();
  }
}

}  // namespace mgpu
