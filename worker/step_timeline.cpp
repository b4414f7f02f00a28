#include "worker/step_timeline.h"

#ifdef MGPU_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace mgpu {

const char* StepPhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::kInput: return "input";
    case StepPhase::kForward: return "forward";
    case StepPhase::kBackward: return "backward";
    case StepPhase::kExposedComm: return "exposed_comm";
    case StepPhase::kOptimizer: return "optimizer";
  }
  return "unknown";
}

PhaseSeconds& PhaseSeconds::operator+=(const PhaseSeconds& other) {
  for (size_t i = 0; i < kStepPhaseCount; ++i) seconds[i] += other.seconds[i];
  return *this;
}

#ifdef MGPU_WITH_CUDA
// Timing events on the current stream; events_[0] is the previous window's last mark.
class StepTimeline::DeviceClock {
 public:
  explicit DeviceClock(c10::DeviceIndex device) : device_(device) { Record(); }

  void Record() {
    if (used_ == events_.size()) events_.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    events_[used_++]->record(at::cuda::getCurrentCUDAStream(device_));
  }

  // Milliseconds between consecutive marks since the last call; keeps the last mark as the start.
  std::vector<float> Intervals() {
    std::vector<float> intervals;
    if (used_ < 2) return intervals;
    events_[used_ - 1]->synchronize();
    for (size_t i = 1; i < used_; ++i) intervals.push_back(events_[i - 1]->elapsed_time(*events_[i]));
    std::swap(events_[0], events_[used_ - 1]);
    used_ = 1;
    return intervals;
  }

 private:
  c10::DeviceIndex device_;
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events_;
  size_t used_ = 0;
};
#else
class StepTimeline::DeviceClock {};
#endif

StepTimeline::StepTimeline(const torch::Device& device) : last_host_mark_(std::chrono::steady_clock::now()) {
#ifdef MGPU_WITH_CUDA
  if (device.is_cuda()) device_clock_ = std::make_unique<DeviceClock>(device.index());
#else
  (void)device;
#endif
}

StepTimeline::~StepTimeline() = default;

void StepTimeline::Mark(StepPhase finished) {
#ifdef MGPU_WITH_CUDA
  if (device_clock_) {
    device_clock_->Record();
    marks_.push_back(finished);
    return;
  }
#endif
  const auto now = std::chrono::steady_clock::now();
  host_pending_[finished] += std::chrono::duration<double>(now - last_host_mark_).count();
  last_host_mark_ = now;
}

void StepTimeline::Restart() {
#ifdef MGPU_WITH_CUDA
  if (device_clock_) {
    device_clock_->Record();
    marks_.push_back(std::nullopt);
    return;
  }
#endif
  last_host_mark_ = std::chrono::steady_clock::now();
}

PhaseSeconds StepTimeline::Collect() {
  PhaseSeconds collected;
#ifdef MGPU_WITH_CUDA
  if (device_clock_) {
    const std::vector<float> intervals = device_clock_->Intervals();
    for (size_t i = 0; i < intervals.size(); ++i) {
      if (marks_[i]) collected[*marks_[i]] += intervals[i] / 1000.0;
    }
    marks_.clear();
    return collected;
  }
#endif
  std::swap(collected, host_pending_);
  return collected;
}

}  // namespace mgpu
