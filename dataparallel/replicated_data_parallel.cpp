#include "dataparallel/replicated_data_parallel.h"

#include <optional>

#include <fmt/format.h>

#include "common/status.h"
#include "dataparallel/device_memory.h"
#include "dataparallel/dp_devices.h"

namespace mgpu {
namespace {

std::vector<torch::Tensor> StateOf(torch::nn::Module& model) {
  std::vector<torch::Tensor> state = model.parameters();
  for (const auto& buffer : model.buffers()) state.push_back(buffer);
  return state;
}

// A replica of the primary's architecture on `device` under `precision`. Building a model
// draws its initial values from the default CPU generator; its state is restored, so a dp run
// draws the same random numbers afterwards as a single-device run.
std::shared_ptr<Classifier> BuildReplica(const DataParallelOptions& options, const torch::Device& device) {
  auto generator = at::detail::getDefaultCPUGenerator();
  const torch::Tensor rng_state = generator.get_state();
  std::shared_ptr<Classifier> replica = options.make_model();
  generator.set_state(rng_state);
  replica->to(device);
  ConvertModelForPrecision(*replica, options.precision);
  return replica;
}

}  // namespace

ReplicatedDataParallel::ReplicatedDataParallel(std::shared_ptr<Classifier> primary, DataParallelOptions options)
    : devices_(options.devices),
      precision_(options.precision),
      label_smoothing_(options.label_smoothing),
      threads_(options.devices) {
  replicas_.push_back(std::move(primary));
  for (size_t r = 1; r < devices_.size(); ++r) replicas_.push_back(BuildReplica(options, devices_[r]));
  primary_state_ = StateOf(*replicas_[0]);
  torch::NoGradGuard no_grad;
  for (size_t r = 0; r < devices_.size(); ++r) {
    parameters_.push_back(replicas_[r]->parameters());
    gradients_.emplace_back(parameters_[r], devices_[r]);
    const std::vector<torch::Tensor> state = r == 0 ? primary_state_ : StateOf(*replicas_[r]);
    state_.emplace_back(state, devices_[r]);
    if (!state_[r].Matches(state_[0]) || !gradients_[r].Matches(gradients_[0])) {
      throw Error(ExitCode::kFailure, fmt::format("--mode dp: the replica on {} does not have the primary's "
                                                  "parameters and buffers (same order, shapes and dtypes)",
                                                  DeviceLabel(devices_[r])));
    }
    if (r == 0) continue;
    for (size_t k = 0; k < state.size(); ++k) state[k].set_data(state_[r].views()[k]);
    for (size_t k = 0; k < parameters_[r].size(); ++k) parameters_[r][k].mutable_grad() = gradients_[r].views()[k];
  }
  for (const auto& device : devices_) timers_.emplace_back(device, kIntervals);
  collectives_ = MakeReplicaCollectives(devices_);
}

void ReplicatedDataParallel::AttachGradients(size_t replica) {
  const std::vector<torch::Tensor>& parameters = parameters_[replica];
  const std::vector<torch::Tensor>& views = gradients_[replica].views();
  std::vector<bool> attached(parameters.size());
  bool all_attached = true, none_defined = true;
  for (size_t k = 0; k < parameters.size(); ++k) {
    const torch::Tensor& grad = parameters[k].grad();
    attached[k] = grad.defined() && grad.data_ptr() == views[k].data_ptr() && grad.sizes() == views[k].sizes();
    all_attached = all_attached && attached[k];
    none_defined = none_defined && !grad.defined();
  }
  if (all_attached) return;
  torch::NoGradGuard no_grad;
  if (none_defined) gradients_[replica].Zero();
  for (size_t k = 0; k < parameters.size(); ++k) {
    if (attached[k]) continue;
    if (!none_defined) {
      const torch::Tensor grad = parameters[k].grad();
      if (grad.defined()) {
        views[k].copy_(grad);
      } else {
        views[k].zero_();
      }
    }
    parameters[k].mutable_grad() = views[k];
  }
}

void ReplicatedDataParallel::Broadcast() {
  replicas_stale_ = false;
  if (devices_.size() == 1) return;
  timers_[0].Start(kBroadcast);
  state_[0].Pack(primary_state_);
  std::vector<std::vector<torch::Tensor>> groups;
  for (const auto& state : state_) groups.push_back(state.groups());
  collectives_->BroadcastFromPrimary(groups);
  timers_[0].Stop(kBroadcast);
}

torch::Tensor ReplicatedDataParallel::ForwardBackward(const torch::Tensor& images, const torch::Tensor& labels,
                                                      const GradScaler& scaler, double loss_weight) {
  const int64_t batch = images.size(0);
  if (labels.size(0) != batch || batch == 0) {
    throw Error(ExitCode::kFailure, fmt::format("--mode dp: a batch of {} images and {} labels", batch, labels.size(0)));
  }
  timers_[0].Cancel(kStep);  // a micro-batch of the same step: no optimizer step since the last call
  if (replicas_stale_) Broadcast();
  const size_t n = devices_.size();
  // As even as possible; the first batch % n replicas take one image more.
  std::vector<int64_t> counts(n, batch / static_cast<int64_t>(n)), starts(n, 0);
  for (size_t r = 0; r < n; ++r) {
    if (static_cast<int64_t>(r) < batch % static_cast<int64_t>(n)) ++counts[r];
    if (r > 0) starts[r] = starts[r - 1] + counts[r - 1];
  }
  std::vector<torch::Tensor> scales(n);
  if (scaler.enabled()) {
    for (size_t r = 0; r < n; ++r) scales[r] = scaler.scale_tensor().to(devices_[r], /*non_blocking=*/true);
  }
  const bool training = replicas_[0]->is_training();
  std::vector<torch::Tensor> losses(n);
  threads_.Run([&](size_t r) {
    std::optional<c10::DeviceGuard> device_guard;  // the CPU needs none
    if (devices_[r].is_cuda()) device_guard.emplace(devices_[r]);
    AttachGradients(r);
    if (counts[r] == 0) return;  // fewer images than devices: its gradients stay zero
    if (r > 0) replicas_[r]->train(training);
    DeviceTimer& timer = timers_[r];
    timer.Start(kForward);
    const torch::Tensor x = images.narrow(0, starts[r], counts[r]).to(devices_[r], /*non_blocking=*/true);
    const torch::Tensor y = labels.narrow(0, starts[r], counts[r]).to(devices_[r], /*non_blocking=*/true);
    // The slice's summed loss over the global batch size: each image's gradient is scaled by
    // 1/B, as in one process's mean over the whole batch (a slice mean weighted by n_r/B would
    // round twice).
    const torch::Tensor loss_sum = torch::nn::functional::cross_entropy(
        PolicyForward(*replicas_[r], x, precision_), y,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(label_smoothing_));  // ()
    timer.Stop(kForward);
    timer.Start(kBackward);
    torch::Tensor weighted = loss_sum * (loss_weight / static_cast<double>(batch));
    if (scales[r].defined()) weighted = weighted * scales[r];
    weighted.backward();
    timer.Stop(kBackward);
    losses[r] = loss_sum.detach();
  });

  if (n > 1) {
    timers_[0].Start(kReduce);
    std::vector<std::vector<torch::Tensor>> groups;
    for (const auto& gradients : gradients_) groups.push_back(gradients.groups());
    collectives_->ReduceToPrimary(groups);
    for (size_t r = 1; r < n; ++r) gradients_[r].Zero();
    timers_[0].Stop(kReduce);
  }
  torch::NoGradGuard no_grad;
  torch::Tensor mean_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(devices_[0]));
  for (size_t r = 0; r < n; ++r) {
    if (!losses[r].defined()) continue;
    mean_loss.add_(losses[r].to(devices_[0], /*non_blocking=*/true));
  }
  mean_loss.div_(static_cast<double>(batch));
  replicas_stale_ = true;
  ++forward_backward_calls_;
  timers_[0].Start(kStep);
  return mean_loss;
}

void ReplicatedDataParallel::SyncReplicas() {
  timers_[0].Stop(kStep);
  Broadcast();
}

void ReplicatedDataParallel::Report(nlohmann::json& summary) {
  nlohmann::json names = nlohmann::json::array(), peaks = nlohmann::json::array();
  nlohmann::json forward = nlohmann::json::array(), backward = nlohmann::json::array();
  std::vector<double> primary;
  for (size_t r = 0; r < devices_.size(); ++r) {
    const std::vector<double> totals = timers_[r].Totals();
    if (r == 0) primary = totals;
    names.push_back(DeviceLabel(devices_[r]));
    peaks.push_back(DevicePeakMemoryBytes(devices_[r]));
    forward.push_back(totals[kForward]);
    backward.push_back(totals[kBackward]);
  }
  summary["dp_impl"] = "mgpu";
  summary["dp_comm"] = collectives_->name();
  summary["devices"] = names;
  summary["peak_memory_bytes"] = peaks;
  summary["dp_timing"] = {
      {"clock", devices_[0].is_cuda() ? "cuda-events" : "host"},
      {"devices", names},
      {"forward_seconds", forward},
      {"backward_seconds", backward},
      {"reduce_seconds", primary[kReduce]},
      {"step_seconds", primary[kStep]},
      {"broadcast_seconds", primary[kBroadcast]},
      {"forward_backward_calls", forward_backward_calls_},
      {"broadcasts", timers_[0].counts()[kBroadcast]},
  };
}

std::string ReplicatedDataParallel::Describe() const {
  std::vector<std::string> names;
  for (const auto& device : devices_) names.push_back(DeviceLabel(device));
  return fmt::format("mgpu: {} replicas on {} (primary {}), one thread per device, gradients reduced by {}",
                     devices_.size(), fmt::join(names, ","), names[0], collectives_->name());
}

}  // namespace mgpu
