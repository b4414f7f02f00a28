#include "dataparallel/libtorch_data_parallel.h"

#include <optional>

#include <fmt/format.h>
#include <torch/nn/parallel/data_parallel.h>

#include "common/status.h"
#include "cuda/device_memory.h"
#include "dataparallel/dp_devices.h"

namespace mgpu {

// A module holding one model (child "model"), with the clone() data_parallel's replicate needs.
class LibTorchDataParallel::Replicable : public torch::nn::Module {
 public:
  Replicable(std::shared_ptr<Classifier> model, DataParallelOptions options)
      : model_(register_module("model", std::move(model))), options_(std::move(options)) {}

  torch::Tensor forward(torch::Tensor images) {
    std::optional<c10::DeviceGuard> guard;  // the CPU needs none
    if (images.is_cuda()) guard.emplace(images.device());
    return PolicyForward(*model_, images, options_.precision);
  }

  std::shared_ptr<torch::nn::Module> clone(const std::optional<torch::Device>& device) const override {
    torch::NoGradGuard no_grad;
    std::shared_ptr<Classifier> copy = options_.make_model();
    copy->to(device.value_or(options_.devices.front()));
    ConvertModelForPrecision(*copy, options_.precision);
    copy->train(model_->is_training());
    const auto source_parameters = model_->parameters(), target_parameters = copy->parameters();
    for (size_t k = 0; k < source_parameters.size(); ++k) target_parameters[k].copy_(source_parameters[k]);
    const auto source_buffers = model_->buffers(), target_buffers = copy->buffers();
    for (size_t k = 0; k < source_buffers.size(); ++k) target_buffers[k].copy_(source_buffers[k]);
    return std::make_shared<Replicable>(std::move(copy), options_);
  }

 private:
  std::shared_ptr<Classifier> model_;
  DataParallelOptions options_;
};

LibTorchDataParallel::LibTorchDataParallel(std::shared_ptr<Classifier> primary, DataParallelOptions options)
    : devices_(options.devices), label_smoothing_(options.label_smoothing), timer_(options.devices.front(), kIntervals) {
  for (const auto& device : devices_) {
    if (!device.is_cuda()) {
      throw BadInputError(fmt::format("--dp-impl libtorch runs LibTorch's torch::nn::parallel::data_parallel, "
                                      "which scatters batches with torch::cuda::scatter and needs CUDA devices, "
                                      "not {}; use --dp-impl mgpu for CPU replicas",
                                      DeviceLabel(device)));
    }
  }
  module_ = std::make_shared<Replicable>(std::move(primary), std::move(options));
}

LibTorchDataParallel::~LibTorchDataParallel() = default;

torch::Tensor LibTorchDataParallel::ForwardBackward(const torch::Tensor& images, const torch::Tensor& labels,
                                                    const GradScaler& scaler, double loss_weight) {
  timer_.Cancel(kStep);
  timer_.Start(kForward);
  const torch::Device primary = devices_.front();
  const torch::Tensor logits = torch::nn::parallel::data_parallel(module_, images.to(primary, /*non_blocking=*/true),
                                                                  devices_, primary);  // (B, classes)
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits, labels.to(primary, /*non_blocking=*/true),
      torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing_));
  timer_.Stop(kForward);
  timer_.Start(kBackward);
  scaler.Scale(loss * loss_weight).backward();
  timer_.Stop(kBackward);
  ++forward_backward_calls_;
  timer_.Start(kStep);
  return loss.detach();
}

void LibTorchDataParallel::SyncReplicas() { timer_.Stop(kStep); }

void LibTorchDataParallel::Report(RunSummary& summary) {
  const std::vector<double> totals = timer_.Totals();
  summary.devices.clear();
  summary.peak_memory_bytes.clear();
  for (const auto& device : devices_) {
    summary.devices.push_back(DeviceLabel(device));
    summary.peak_memory_bytes.push_back(DevicePeakMemoryBytes(device));
  }
  summary.dp_impl = "libtorch";
  summary.dp_comm = "libtorch";
  // data_parallel's threads are not ours to time: its whole forward (clone, scatter, replicas,
  // gather) and backward are timed on the primary's stream, as one entry.
  DataParallelTiming timing;
  timing.clock = "cuda-events";
  timing.devices = {summary.devices[0]};
  timing.forward_seconds = {totals[kForward]};
  timing.backward_seconds = {totals[kBackward]};
  timing.step_seconds = totals[kStep];
  timing.forward_backward_calls = forward_backward_calls_;
  summary.dp_timing = timing;
}

std::string LibTorchDataParallel::Describe() const {
  std::vector<std::string> names;
  for (const auto& device : devices_) names.push_back(DeviceLabel(device));
  return fmt::format("libtorch: torch::nn::parallel::data_parallel on {} every step (clones the model each call)",
                     fmt::join(names, ","));
}

}  // namespace mgpu
