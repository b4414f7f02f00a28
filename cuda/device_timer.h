// DeviceTimer: the time one device spends in numbered intervals (forward, backward, reduce...),
// summed over a run and measured where the work runs:
//   - CUDA: timing events recorded on the stream current for the device on the calling thread,
//     so an interval is the GPU's time between the two points in its queue, not the host's time
//     to queue kernels;
//   - CPU: the host clock (CPU kernels run synchronously on the calling thread).
// Recording never waits for the device: finished CUDA intervals are added up in batches when
// later intervals start, the rest by Totals(), which waits. One thread uses a timer at a time.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

class DeviceTimer {
 public:
  DeviceTimer(torch::Device device, size_t intervals);
  ~DeviceTimer();
  DeviceTimer(DeviceTimer&&) noexcept;
  DeviceTimer& operator=(DeviceTimer&&) = delete;
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  // Opens `interval`; an interval already open is restarted (its start is dropped).
  void Start(size_t interval);
  // Closes `interval` and counts it; does nothing when it is not open.
  void Stop(size_t interval);
  // Drops an open `interval` without counting it.
  void Cancel(size_t interval);
  // Seconds per interval so far (intervals still open are not counted); waits for the device.
  std::vector<double> Totals();
  // How many times each interval was stopped.
  const std::vector<int64_t>& counts() const { return counts_; }

 private:
  struct Marks;  // CUDA events (with CUDA) or host times of the open intervals
  void Harvest(bool wait);

  torch::Device device_;
  std::vector<double> totals_;
  std::vector<int64_t> counts_;
  std::unique_ptr<Marks> marks_;
};

}  // namespace mgpu
