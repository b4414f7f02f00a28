#include "dataparallel/device_timer.h"

#include <optional>

#ifdef MGPU_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mgpu {

using Clock = std::chrono::steady_clock;

struct DeviceTimer::Marks {
  std::vector<std::optional<Clock::time_point>> host_start;  // CPU: per interval
#ifdef MGPU_WITH_CUDA
  using Event = std::unique_ptr<at::cuda::CUDAEvent>;
  struct Pending {
    size_t interval;
    Event start, stop;
  };
  std::vector<Event> open;      // CUDA: per interval, the start event of an open interval
  std::deque<Pending> pending;  // recorded, not yet known to be finished, in stream order
  std::vector<Event> spare;     // finished events, reused

  Event Take() {
    if (spare.empty()) return std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);  // with timing
    Event event = std::move(spare.back());
    spare.pop_back();
    return event;
  }
#endif
};

DeviceTimer::DeviceTimer(torch::Device device, size_t intervals)
    : device_(device), totals_(intervals, 0.0), counts_(intervals, 0), marks_(std::make_unique<Marks>()) {
  marks_->host_start.resize(intervals);
#ifdef MGPU_WITH_CUDA
  marks_->open.resize(intervals);
#endif
}

DeviceTimer::~DeviceTimer() = default;
DeviceTimer::DeviceTimer(DeviceTimer&&) noexcept = default;

void DeviceTimer::Start(size_t interval) {
#ifdef MGPU_WITH_CUDA
  if (device_.is_cuda()) {
    Harvest(/*wait=*/false);
    auto& start = marks_->open[interval];
    if (!start) start = marks_->Take();
    start->record(c10::cuda::getCurrentCUDAStream(device_.index()));
    return;
  }
#endif
  marks_->host_start[interval] = Clock::now();
}

void DeviceTimer::Stop(size_t interval) {
#ifdef MGPU_WITH_CUDA
  if (device_.is_cuda()) {
    auto& start = marks_->open[interval];
    if (!start) return;
    Marks::Event stop = marks_->Take();
    stop->record(c10::cuda::getCurrentCUDAStream(device_.index()));
    marks_->pending.push_back(Marks::Pending{interval, std::move(start), std::move(stop)});
    start = nullptr;
    ++counts_[interval];
    return;
  }
#endif
  auto& start = marks_->host_start[interval];
  if (!start) return;
  totals_[interval] += std::chrono::duration<double>(Clock::now() - *start).count();
  start.reset();
  ++counts_[interval];
}

void DeviceTimer::Cancel(size_t interval) {
#ifdef MGPU_WITH_CUDA
  if (marks_->open[interval]) marks_->spare.push_back(std::move(marks_->open[interval]));
#endif
  marks_->host_start[interval].reset();
}

void DeviceTimer::Harvest(bool wait) {
#ifdef MGPU_WITH_CUDA
  while (!marks_->pending.empty()) {
    auto& front = marks_->pending.front();
    if (wait) front.stop->synchronize();
    if (!front.stop->query()) return;
    totals_[front.interval] += static_cast<double>(front.start->elapsed_time(*front.stop)) / 1000.0;
    marks_->spare.push_back(std::move(front.start));
    marks_->spare.push_back(std::move(front.stop));
    marks_->pending.pop_front();
  }
#endif
}

std::vector<double> DeviceTimer::Totals() {
  Harvest(/*wait=*/true);
  return totals_;
}

}  // namespace mgpu
