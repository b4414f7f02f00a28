#include "cuda/device_timer.h"

#include <optional>

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace mgpu {

using Clock = std::chrono::steady_clock;

constexpr size_t kHarvestBatch = 32;  // recorded intervals, per timer

// Raw CUDA events rather than at::cuda::CUDAEvent, whose record also asks whether the stream is
// capturing and whose elapsed_time queries both events again: a launch-bound step records
// several intervals, and each call costs host time on the critical path.
struct DeviceTimer::Marks {
  std::vector<std::optional<Clock::time_point>> host_start;  // CPU: per interval
#ifdef MGPU_WITH_CUDA
  struct Pending {
    size_t interval;
    cudaEvent_t start, stop;
  };
  int device = -1;
  std::vector<cudaEvent_t> open;  // CUDA: per interval, the start event of an open interval, or null
  std::deque<Pending> pending;    // recorded, not yet known to be finished, in stream order
  std::vector<cudaEvent_t> spare;  // finished events, reused
  std::vector<cudaEvent_t> created;

  ~Marks() {
    for (cudaEvent_t event : created) cudaEventDestroy(event);
  }
  cudaEvent_t Take() {
    if (!spare.empty()) {
      const cudaEvent_t event = spare.back();
      spare.pop_back();
      return event;
    }
    c10::cuda::CUDAGuard on_device(static_cast<c10::DeviceIndex>(device));
    cudaEvent_t event = nullptr;
    C10_CUDA_CHECK(cudaEventCreate(&event));  // with timing
    created.push_back(event);
    return event;
  }
  void Record(cudaEvent_t event) {
    c10::cuda::CUDAGuard on_device(static_cast<c10::DeviceIndex>(device));
    C10_CUDA_CHECK(cudaEventRecord(event, c10::cuda::getCurrentCUDAStream(device).stream()));
  }
#endif
};

DeviceTimer::DeviceTimer(torch::Device device, size_t intervals)
    : device_(device), totals_(intervals, 0.0), counts_(intervals, 0), marks_(std::make_unique<Marks>()) {
  marks_->host_start.resize(intervals);
#ifdef MGPU_WITH_CUDA
  marks_->open.resize(intervals, nullptr);
  marks_->device = device.is_cuda() ? device.index() : -1;
#endif
}

DeviceTimer::~DeviceTimer() = default;
DeviceTimer::DeviceTimer(DeviceTimer&&) noexcept = default;

void DeviceTimer::Start(size_t interval) {
#ifdef MGPU_WITH_CUDA
  if (device_.is_cuda()) {
    // Queried in batches: the intervals of a few steps back have finished, so each query
    // harvests one instead of finding the newest still running.
    if (marks_->pending.size() >= kHarvestBatch) Harvest(/*wait=*/false);
    cudaEvent_t& start = marks_->open[interval];
    if (start == nullptr) start = marks_->Take();
    marks_->Record(start);
    return;
  }
#endif
  marks_->host_start[interval] = Clock::now();
}

void DeviceTimer::Stop(size_t interval) {
#ifdef MGPU_WITH_CUDA
  if (device_.is_cuda()) {
    cudaEvent_t& start = marks_->open[interval];
    if (start == nullptr) return;
    const cudaEvent_t stop = marks_->Take();
    marks_->Record(stop);
    marks_->pending.push_back(Marks::Pending{interval, start, stop});
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
  if (marks_->open[interval] != nullptr) {
    marks_->spare.push_back(marks_->open[interval]);
    marks_->open[interval] = nullptr;
  }
#endif
  marks_->host_start[interval].reset();
}

void DeviceTimer::Harvest(bool wait) {
#ifdef MGPU_WITH_CUDA
  while (!marks_->pending.empty()) {
    const Marks::Pending front = marks_->pending.front();
    if (wait) {
      C10_CUDA_CHECK(cudaEventSynchronize(front.stop));
    } else {
      const cudaError_t state = cudaEventQuery(front.stop);
      if (state == cudaErrorNotReady) {
        (void)cudaGetLastError();  // not an error: clear it
        return;
      }
      C10_CUDA_CHECK(state);
    }
    float milliseconds = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, front.start, front.stop));
    totals_[front.interval] += static_cast<double>(milliseconds) / 1000.0;
    marks_->spare.push_back(front.start);
    marks_->spare.push_back(front.stop);
    marks_->pending.pop_front();
  }
#else
  (void)wait;
#endif
}

std::vector<double> DeviceTimer::Totals() {
  Harvest(/*wait=*/true);
  return totals_;
}

}  // namespace mgpu
