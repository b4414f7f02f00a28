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
namespace {

// Timing events for reuse: a window gives its events back when it is destroyed, so marking a
// step creates no CUDA events once the first windows have been read.
struct EventPool {
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> free;
};

}  // namespace

struct TimelineWindow::DeviceMarks {
  // events[0] is the previous window's last mark (shared with it); marks[i] ends at events[i + 1]
  // and names the phase it ends, or nullopt (Restart).
  std::vector<std::shared_ptr<at::cuda::CUDAEvent>> events;
  std::vector<std::optional<StepPhase>> marks;
};

class StepTimeline::DeviceClock {
 public:
  explicit DeviceClock(c10::DeviceIndex device) : device_(device), pool_(std::make_shared<EventPool>()) {
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
  std::shared_ptr<at::cuda::CUDAEvent> Record() {
    std::unique_ptr<at::cuda::CUDAEvent> event;
    if (pool_->free.empty()) {
      event = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    } else {
      event = std::move(pool_->free.back());
      pool_->free.pop_back();
    }
    event->record(at::cuda::getCurrentCUDAStream(device_));
    std::weak_ptr<EventPool> pool = pool_;
    return std::shared_ptr<at::cuda::CUDAEvent>(event.release(), [pool](at::cuda::CUDAEvent* done) {
      if (const auto alive = pool.lock()) {
        alive->free.emplace_back(done);
      } else {
        delete done;
      }
    });
  }

  c10::DeviceIndex device_;
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
  if (device_) return device_->events.back()->query();
#endif
  return true;
}

PhaseSeconds TimelineWindow::Seconds() const {
#ifdef MGPU_WITH_CUDA
  if (device_) {
    PhaseSeconds seconds;
    device_->events.back()->synchronize();
    for (size_t i = 0; i < device_->marks.size(); ++i) {
      if (device_->marks[i]) {
        seconds[*device_->marks[i]] += device_->events[i]->elapsed_time(*device_->events[i + 1]) / 1000.0;
      }
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
