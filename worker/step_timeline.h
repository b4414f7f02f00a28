// Where a training step's time goes, measured where the work runs.
//
// The loop marks the end of each phase of a step (input copy, forward, backward, exposed
// communication, optimizer); a phase lasts from the previous mark to its own. On a GPU the marks
// are CUDA events recorded on the current stream, so the phases are device time and the host
// never waits for them: Cut() hands the marks so far over as a TimelineWindow, whose durations
// are read once the device has passed its end (metrics rows read them a row later, so that
// writing a row never drains the device's queue). On the CPU, where work is synchronous, the
// marks read the host clock.
//
// `exposed_comm` is the device time from the end of backward until the averaged gradients are
// usable: the part of the all-reduces that backward did not hide (plus the copy out of the
// buckets). `input` is everything between the previous step's last mark and this step's first
// kernel: the host-to-device copy and any time the device sat idle waiting for the host.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

enum class StepPhase { kInput, kForward, kBackward, kExposedComm, kOptimizer };
inline constexpr size_t kStepPhaseCount = 5;

// The phase's name in summary.json and the logs ("exposed_comm").
const char* StepPhaseName(StepPhase phase);

struct PhaseSeconds {
  std::array<double, kStepPhaseCount> seconds{};
  double& operator[](StepPhase phase) { return seconds[static_cast<size_t>(phase)]; }
  double operator[](StepPhase phase) const { return seconds[static_cast<size_t>(phase)]; }
  PhaseSeconds& operator+=(const PhaseSeconds& other);
};

// The marks of one stretch of a StepTimeline (e.g. the steps of one metrics row).
class TimelineWindow {
 public:
  TimelineWindow();
  ~TimelineWindow();
  TimelineWindow(TimelineWindow&&) noexcept;
  TimelineWindow& operator=(TimelineWindow&&) noexcept;

  // Whether the device has passed the window's last mark (always true on the CPU); never waits.
  bool Ready() const;
  // Seconds per phase in the window. On a GPU this waits for the device to reach its last mark.
  PhaseSeconds Seconds() const;
  // Host seconds per phase: how long the host took to issue each phase's work. On a GPU, steps
  // whose host time is about their device time are bound by the host (launch overhead, data).
  const PhaseSeconds& HostSeconds() const { return host_; }

 private:
  friend class StepTimeline;
  struct DeviceMarks;
  std::unique_ptr<DeviceMarks> device_;  // null on the CPU
  PhaseSeconds host_;  // host clock; Seconds() on the CPU
};

class StepTimeline {
 public:
  explicit StepTimeline(const torch::Device& device);
  ~StepTimeline();
  StepTimeline(const StepTimeline&) = delete;
  StepTimeline& operator=(const StepTimeline&) = delete;

  // Records the end of `finished`, which began at the previous mark (or at construction).
  void Mark(StepPhase finished);
  // Starts the next phase here, leaving the time since the previous mark out of every phase.
  void Restart();
  // Hands over the marks since the previous Cut() (the first: since construction); the time
  // after the last mark belongs to the next window. Never waits for the device.
  TimelineWindow Cut();

 private:
  class DeviceClock;
  std::unique_ptr<DeviceClock> device_clock_;  // null on the CPU
  std::chrono::steady_clock::time_point last_host_mark_;
  PhaseSeconds host_pending_;
};

}  // namespace mgpu
