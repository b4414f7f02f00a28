#include "worker/deferred_rows.h"

#ifdef MGPU_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace mgpu {

std::optional<NonFiniteLoss> FirstNonFiniteLoss(const WindowLosses& window) {
  if (window.empty()) return std::nullopt;
  const torch::Tensor finite = torch::stack(window.losses).isfinite();  // (N) bool
  if (finite.all().item<bool>()) return std::nullopt;
  const auto first = static_cast<size_t>(finite.logical_not().to(torch::kLong).argmax().item<int64_t>());
  return NonFiniteLoss{window.steps[first], window.losses[first].item<double>(),
                       window.scales.empty() ? 1.0 : window.scales[first].item<double>()};
}

struct DeferredRows::Pending {
  HostPart host;
  TimelineWindow timeline;
  WindowLosses losses;
  torch::Tensor values;  // (2 or 3) double on the host: last loss, loss scale[, all losses finite]
#ifdef MGPU_WITH_CUDA
  std::optional<at::cuda::CUDAEvent> copied;  // set when `values` is copied from a GPU
#endif

  bool Ready() const {
#ifdef MGPU_WITH_CUDA
    if (copied && !copied->query()) return false;
#endif
    return timeline.Ready();
  }
  void Wait() {
#ifdef MGPU_WITH_CUDA
    if (copied) copied->synchronize();
#endif
  }
};

DeferredRows::DeferredRows(const torch::Device& device) {
  if (!device.is_cuda()) return;
  // The first row would otherwise pay, in the middle of training, for allocating pinned host
  // blocks and loading the kernels of its few operators: measured on an H200 as 30-80 ms of
  // host stall, longer than the device's queue, so the GPU sat idle. A few rows of each kind
  // (with and without losses to check), in flight together, leave those blocks cached.
  const auto zero = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  for (int i = 0; i < 4; ++i) {
    Add({}, zero, zero, TimelineWindow(), {});
    Add({}, zero, zero, TimelineWindow(), WindowLosses{{zero}, {0}, {zero}});
  }
  Take(/*wait=*/true);
}
DeferredRows::~DeferredRows() = default;

void DeferredRows::Add(HostPart host, const torch::Tensor& last_loss, const torch::Tensor& loss_scale,
                       TimelineWindow timeline, WindowLosses losses) {
  auto row = std::make_unique<Pending>();
  std::vector<torch::Tensor> values{last_loss.detach().to(torch::kDouble).reshape({}),
                                    loss_scale.detach().to(torch::kDouble).reshape({})};
  if (!losses.empty()) values.push_back(torch::stack(losses.losses).isfinite().all().to(torch::kDouble));
  const torch::Tensor on_device = torch::stack(values);
  if (on_device.is_cuda()) {
#ifdef MGPU_WITH_CUDA
    row->values = torch::empty(on_device.sizes(), on_device.options().device(torch::kCPU).pinned_memory(true));
    row->values.copy_(on_device, /*non_blocking=*/true);
    row->copied.emplace();
    row->copied->record(at::cuda::getCurrentCUDAStream(on_device.get_device()));
#endif
  } else {
    row->values = on_device;
  }
  row->host = std::move(host);
  row->timeline = std::move(timeline);
  row->losses = std::move(losses);
  pending_.push_back(std::move(row));
}

std::vector<DeferredRows::Completed> DeferredRows::Take(bool wait) {
  std::vector<Completed> done;
  while (!pending_.empty() && (wait || pending_.front()->Ready())) {
    std::unique_ptr<Pending> row = std::move(pending_.front());
    pending_.pop_front();
    row->Wait();
    Completed completed;
    completed.window_seconds = row->timeline.Seconds();
    completed.host_window_seconds = row->timeline.HostSeconds();
    const double* values = row->values.data_ptr<double>();
    if (row->values.numel() > 2 && values[2] == 0) completed.nonfinite = FirstNonFiniteLoss(row->losses);
    StepMetrics& m = completed.metrics;
    m = row->host.metrics;
    m.loss = values[0];
    m.loss_scale = values[1];
    double seconds = 0;
    for (double s : completed.window_seconds.seconds) seconds += s;
    const double steps = static_cast<double>(std::max<int64_t>(row->host.steps, 1));
    m.step_seconds = seconds / steps;
    m.images_per_second = seconds > 0 ? static_cast<double>(row->host.images) / seconds : 0;
    for (size_t i = 0; i < kStepPhaseCount; ++i) m.phase_seconds.seconds[i] = completed.window_seconds.seconds[i] / steps;
    done.push_back(std::move(completed));
  }
  return done;
}

}  // namespace mgpu
