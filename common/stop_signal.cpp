#include "common/stop_signal.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include <fmt/format.h>

namespace mgpu {
namespace {

// When the first stop signal came (CLOCK_MONOTONIC nanoseconds, never 0 once set), and which.
// The time is claimed first (compare-and-swap), so two signals handled at once on two threads
// agree on which one was first.
std::atomic<int64_t> first_signal_nanos{0};
std::atomic<int> first_signal{0};
static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "signal handlers may only touch lock-free atomics");

int64_t MonotonicNanos() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec + 1;  // +1: never 0
}

extern "C" void OnStopSignal(int signal) {
  const int64_t now = MonotonicNanos();
  int64_t unset = 0;
  if (first_signal_nanos.compare_exchange_strong(unset, now)) {
    first_signal.store(signal);
    return;
  }
  if (signal == SIGUSR1) return;
  const int64_t window = std::chrono::nanoseconds(kSameRequestWindow).count();
  if (now - first_signal_nanos.load() >= window) ::_exit(128 + signal);
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};

}  // namespace

bool HangUpIsIgnored() {
  struct sigaction current {};
  return ::sigaction(SIGHUP, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

void InstallStopSignalHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal : kStopSignals) sigaddset(&action.sa_mask, signal);
  for (int signal : kStopSignals) {
    if (signal == SIGHUP && HangUpIsIgnored()) continue;  // nohup's choice (stop_signal.h)
    ::sigaction(signal, &action, nullptr);
  }
}

int ReceivedStopSignal() { return first_signal.load(std::memory_order_relaxed); }

std::string SignalName(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation != nullptr ? fmt::format("SIG{}", abbreviation) : fmt::format("signal {}", signal);
}

}  // namespace mgpu
