#include "worker/trace_profiler.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "common/files.h"
#include "common/status.h"

namespace mgpu {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

}  // namespace

// One profile from its first step to its end; the open step's range lives here too.
class TraceProfiler::Session {
 public:
  explicit Session(const torch::Device& device) {
    std::set<ActivityType> activities{ActivityType::CPU};
    if (device.is_cuda()) activities.insert(ActivityType::CUDA);
    const ProfilerConfig config(ProfilerState::KINETO);
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
  }
  ~Session() {
    if (!stopped_) Stop();
  }

  void OpenStep(int64_t step) {
    step_range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (step_range_->isActive()) step_range_->before(fmt::format("mgpu step {}", step));
  }
  void CloseStep() { step_range_.reset(); }

  std::unique_ptr<profiler::ProfilerResult> Stop() {
    CloseStep();
    stopped_ = true;
    return profiler::disableProfiler();
  }

 private:
  std::unique_ptr<at::RecordFunction> step_range_;  // ends the range when destroyed
  bool stopped_ = false;
};

TraceProfiler::TraceProfiler(ProfileWindow window, std::string path, const torch::Device& device)
    : window_(window), path_(std::move(path)), device_(device) {}

TraceProfiler::~TraceProfiler() = default;

void TraceProfiler::BeforeStep(int64_t step) {
  if (!window_.enabled() || step < window_.first || step > window_.last) return;
  if (!session_) session_ = std::make_unique<Session>(device_);
  session_->OpenStep(step);
}

std::string TraceProfiler::AfterStep(int64_t step) {
  if (!session_) return "";
  session_->CloseStep();
  return step >= window_.last ? Finish() : "";
}

std::string TraceProfiler::Finish() {
  if (!session_) return "";
  // The device's part of the trace is what it ran, not what the host has queued so far.
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const std::unique_ptr<profiler::ProfilerResult> result = session_->Stop();
  session_.reset();
  window_ = {};  // one trace per run
  // ProfilerResult::save writes in place; the trace appears under its name only when whole.
  const std::string partial = path_ + ".partial";
  result->save(partial);
  WriteFileAtomically(path_, ReadFile(partial));
  RemovePath(partial);
  return path_;
}

}  // namespace mgpu
