#include "worker/step_timeline.h"

#include <type_traits>

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
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
namespace {

// Timing events for reuse: a window gives its events back when it is destroyed, so marking a
// step creates no CUDA events once the first windows have been read. Raw CUDA events rather than
// at::cuda::CUDAEvent, whose record also asks whether the stream is capturing and whose
// elapsed_time queries both events again: a window of a few hundred graphed steps holds over a
// thousand marks, and reading them is host time on the training thread.
struct EventPool {
  c10::DeviceIndex device = 0;
  std::vector<cudaEvent_t> free;

  ~EventPool() {
    for (cudaEvent_t event : free) cudaEventDestroy(event);
  }
};

}  // namespace

struct TimelineWindow::DeviceMarks {
  // events[0] is the previous window's last mark (shared with it); marks[i] ends at events[i + 1]
  // and names the phase it ends, or nullopt (Restart). Each event is recorded; the pool gets it
  // back when no window holds it.
  std::vector<std::shared_ptr<std::remove_pointer_t<cudaEvent_t>>> events;
  std::vector<std::optional<StepPhase>> marks;
};

class StepTimeline::DeviceClock {
 public:
  explicit DeviceClock(c10::DeviceIndex device) : pool_(std::make_shared<EventPool>()) {
    pool_->device = device;
    current_.events.push_back(Record());
  }

  void Mark(std::optional<StepPhase> finished) {
    current_.events.push_back(Record());
    current_.marks.push_back(finished);
  }

  std::unique_ptr<TimelineWindow::DeviceMarks> Cut() {
    auto window = std::make_unique<TimelineWindow::DeviceMarks>(std::move(current_));
    current_ = {};
    current_.events.push_back(window->events.back());
    return window;
  }

 private:
  std::shared_ptr<std::remove_pointer_t<cudaEvent_t>> Record() {
    cudaEvent_t event = nullptr;
    if (pool_->free.empty()) {
      c10::cuda::CUDAGuard on_device(pool_->device);
      C10_CUDA_CHECK(cudaEventCreate(&event));  // with timing
    } else {
      event = pool_->free.back();
      pool_->free.pop_back();
    }
    C10_CUDA_CHECK(cudaEventRecord(event, c10::cuda::getCurrentCUDAStream(pool_->device).stream()));
    std::weak_ptr<EventPool> pool = pool_;
    return {event, [pool](cudaEvent_t done) {
              if (const auto alive = pool.lock()) {
                alive->free.push_back(done);
              } else {
                cudaEventDestroy(done);
              }
            }};
  }

  std::shared_ptr<EventPool> pool_;
  TimelineWindow::DeviceMarks current_;
};
#else
struct TimelineWindow::DeviceMarks {};
class StepTimeline::DeviceClock {};
#endif

TimelineWindow::TimelineWindow() = default;
TimelineWindow::~TimelineWindow() = default;
TimelineWindow::TimelineWindow(TimelineWindow&&) noexcept = default;
TimelineWindow& TimelineWindow::operator=(TimelineWindow&&) noexcept = default;

bool TimelineWindow::Ready() const {
#ifdef MGPU_WITH_CUDA
  if (device_) {
    const cudaError_t state = cudaEventQuery(device_->events.back().get());
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it
      return false;
    }
    C10_CUDA_CHECK(state);
  }
#endif
  return true;
}

PhaseSeconds TimelineWindow::Seconds() const {
#ifdef MGPU_WITH_CUDA
  if (device_) {
    PhaseSeconds seconds;
    // Every mark is recorded on one stream, so all have completed once the last has.
    C10_CUDA_CHECK(cudaEventSynchronize(device_->events.back().get()));
    for (size_t i = 0; i < device_->marks.size(); ++i) {
      if (!device_->marks[i]) continue;
      float milliseconds = 0;
      C10_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, device_->events[i].get(), device_->events[i + 1].get()));
      seconds[*device_->marks[i]] += static_cast<double>(milliseconds) / 1000.0;
    }
    return seconds;
  }
#endif
  return host_;
}

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
  if (device_clock_) device_clock_->Mark(finished);
#endif
  const auto now = std::chrono::steady_clock::now();
  host_pending_[finished] += std::chrono::duration<double>(now - last_host_mark_).count();
  last_host_mark_ = now;
}

void StepTimeline::Restart() {
#ifdef MGPU_WITH_CUDA
  if (device_clock_) device_clock_->Mark(std::nullopt);
#endif
  last_host_mark_ = std::chrono::steady_clock::now();
}

TimelineWindow StepTimeline::Cut() {
  TimelineWindow window;
#ifdef MGPU_WITH_CUDA
  if (device_clock_) window.device_ = device_clock_->Cut();
#endif
  std::swap(window.host_, host_pending_);
  return window;
}

}  // namespace mgpu
