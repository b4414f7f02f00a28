#include "dataparallel/replicated_data_parallel.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "common/status.h"
#include "cuda/device_memory.h"
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
      cuda_graphs_(options.cuda_graphs),
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
                                                  "parameters and buffers (same order, shapes, layouts and dtypes)",
                                                  DeviceLabel(devices_[r])));
    }
    if (r == 0) state_[0].Pack(state);  // the replicas get theirs from the first broadcast
    for (size_t k = 0; k < state.size(); ++k) state[k].set_data(state_[r].views()[k]);
  }
  seeds_.resize(devices_.size());
  seed_factors_.resize(devices_.size(), 0.0);
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

void ReplicatedDataParallel::CollectGradients(size_t replica) {
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor>& parameters = parameters_[replica];
  const std::vector<torch::Tensor>& views = gradients_[replica].views();
  std::vector<torch::Tensor> targets, sources;
  for (size_t k = 0; k < parameters.size(); ++k) {
    const torch::Tensor& grad = parameters[k].grad();
    if (!grad.defined()) {
      views[k].zero_();  // a parameter this slice did not use
    } else if (grad.data_ptr() != views[k].data_ptr()) {
      targets.push_back(views[k]);
      sources.push_back(grad);
    }
  }
  if (!targets.empty()) at::_foreach_copy_(targets, sources);
  for (size_t k = 0; k < parameters.size(); ++k) {
    if (replica == 0) {
      parameters[k].mutable_grad() = views[k];
    } else {
      parameters[k].mutable_grad().reset();  // its memory back to the allocator until the next backward
    }
  }
}

bool ReplicatedDataParallel::PrimaryIsFlat() const {
  const std::vector<torch::Tensor>& views = state_[0].views();
  for (size_t k = 0; k < primary_state_.size(); ++k) {
    if (primary_state_[k].data_ptr() != views[k].data_ptr() || primary_state_[k].sizes() != views[k].sizes()) {
      return false;
    }
  }
  return true;
}

void ReplicatedDataParallel::Broadcast() {
  replicas_stale_ = false;
  if (devices_.size() == 1) return;
  timers_[0].Start(kBroadcast);
  if (!PrimaryIsFlat()) state_[0].Pack(primary_state_);
  std::vector<std::vector<torch::Tensor>> groups;
  for (const auto& state : state_) groups.push_back(state.groups());
  collectives_->BroadcastFromPrimary(groups);
  timers_[0].Stop(kBroadcast);
}

torch::Tensor ReplicatedDataParallel::BackwardSeed(size_t replica, double loss_factor, const torch::Tensor& scale) {
  if (scale.defined()) return scale * loss_factor;
  if (!seeds_[replica].defined() || seed_factors_[replica] != loss_factor) {
    seeds_[replica] =
        torch::full({}, loss_factor, torch::TensorOptions().dtype(torch::kFloat).device(devices_[replica]));
    seed_factors_[replica] = loss_factor;
  }
  return seeds_[replica];
}

torch::Tensor ReplicatedDataParallel::SliceForwardBackward(size_t replica, const torch::Tensor& images,
                                                          const torch::Tensor& labels, const torch::Tensor& seed,
                                                          DeviceTimer* timer) {
  if (timer) timer->Start(kForward);
  const torch::Tensor loss_sum = torch::nn::functional::cross_entropy(
      PolicyForward(*replicas_[replica], images, precision_, /*autocast_cache=*/timer != nullptr), labels,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(label_smoothing_));  // ()
  if (timer) timer->Stop(kForward);
  if (timer) timer->Start(kBackward);
  torch::autograd::backward({loss_sum}, {seed});
  if (timer) timer->Stop(kBackward);
  return loss_sum.detach();
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
  // The slice's summed loss over the global batch size: each image's gradient is scaled by 1/B,
  // as in one process's mean over the whole batch (a slice mean weighted by n_r/B would round twice).
  const double loss_factor = loss_weight / static_cast<double>(batch);
  const bool training = replicas_[0]->is_training();
  // Replica r's inputs: its slice of the batch (and the loss scale), on any device.
  auto slice_inputs = [&](size_t r) {
    std::vector<torch::Tensor> inputs = {images.narrow(0, starts[r], counts[r]), labels.narrow(0, starts[r], counts[r])};
    if (scales[r].defined()) inputs.push_back(scales[r]);
    return inputs;
  };

  bool replay = false;
  if (cuda_graphs_) {
    if (graphs_.empty() && eager_calls_ >= kEagerCallsBeforeCapture && batch >= largest_eager_batch_ &&
        batch >= static_cast<int64_t>(n)) {
      graphs_.resize(n);
      graph_batch_ = batch;
      graph_loss_factor_ = loss_factor;
      threads_.Run([&](size_t r) {
        std::lock_guard<std::mutex> one_at_a_time(capture_mutex_);
        AttachGradients(r);  // the graph accumulates into the flat gradient buffers
        if (r > 0) replicas_[r]->train(training);
        graphs_[r] = std::make_unique<CapturedGraph>(
            slice_inputs(r),
            [&, r](const std::vector<torch::Tensor>& in) {
              const torch::Tensor seed =
                  in.size() > 2 ? in[2] * loss_factor
                                : torch::full({}, loss_factor, torch::TensorOptions().dtype(torch::kFloat).device(devices_[r]));
              return SliceForwardBackward(r, in[0], in[1], seed, /*timer=*/nullptr);
            },
            devices_[r], "--cuda-graphs");
        // Replays write into the views whatever .grad holds; a replica's eager backward (an
        // epoch's last batch) must start from no gradients, not add to a replay's.
        if (r > 0) {
          for (const torch::Tensor& parameter : parameters_[r]) parameter.mutable_grad().reset();
        }
      });
    }
    replay = !graphs_.empty() && batch == graph_batch_ && loss_factor == graph_loss_factor_;
    if (replay) {
      ++replays_;
    } else {
      ++eager_calls_;
      largest_eager_batch_ = std::max(largest_eager_batch_, batch);
    }
  }

  std::vector<torch::Tensor> loss_sums(n);  // per replica: () float32, its slice's summed loss
  threads_.Run([&](size_t r) {
    std::optional<c10::DeviceGuard> device_guard;  // the CPU needs none
    if (devices_[r].is_cuda()) device_guard.emplace(devices_[r]);
    if (r > 0) replicas_[r]->train(training);
    if (counts[r] == 0) {  // fewer images than devices: it adds nothing
      if (r > 0) gradients_[r].Zero();
      loss_sums[r] = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(devices_[r]));
    } else if (replay) {
      // The graph adds to the flat gradient buffers; a replica's must be zero first.
      if (r == 0) {
        AttachGradients(0);
      } else {
        gradients_[r].Zero();
      }
      timers_[r].Start(kBackward);  // forward and backward in one launch
      loss_sums[r] = graphs_[r]->Replay(slice_inputs(r));
      timers_[r].Stop(kBackward);
    } else {
      const torch::Tensor x = images.narrow(0, starts[r], counts[r]).to(devices_[r], /*non_blocking=*/true);
      const torch::Tensor y = labels.narrow(0, starts[r], counts[r]).to(devices_[r], /*non_blocking=*/true);
      loss_sums[r] = SliceForwardBackward(r, x, y, BackwardSeed(r, loss_factor, scales[r]), &timers_[r]);
      CollectGradients(r);
    }
  });

  torch::NoGradGuard no_grad;
  if (n > 1) {
    // The slices' summed losses travel with the gradients: no copy of their own.
    timers_[0].Start(kReduce);
    std::vector<std::vector<torch::Tensor>> tensors;
    for (size_t r = 0; r < n; ++r) {
      tensors.push_back(gradients_[r].groups());
      tensors.back().push_back(loss_sums[r]);
    }
    collectives_->ReduceToPrimary(tensors);
    timers_[0].Stop(kReduce);
  }
  const torch::Tensor mean_loss = loss_sums[0] / static_cast<double>(batch);  // ()
  replicas_stale_ = true;
  ++forward_backward_calls_;
  timers_[0].Start(kStep);
  return mean_loss;
}

void ReplicatedDataParallel::SyncReplicas() {
  timers_[0].Stop(kStep);
  Broadcast();
}

void ReplicatedDataParallel::Report(RunSummary& summary) {
  DataParallelTiming timing;
  timing.clock = devices_[0].is_cuda() ? "cuda-events" : "host";
  summary.peak_memory_bytes.clear();
  std::vector<double> primary;
  for (size_t r = 0; r < devices_.size(); ++r) {
    const std::vector<double> totals = timers_[r].Totals();
    if (r == 0) primary = totals;
    timing.devices.push_back(DeviceLabel(devices_[r]));
    summary.peak_memory_bytes.push_back(DevicePeakMemoryBytes(devices_[r]));
    timing.forward_seconds.push_back(totals[kForward]);
    timing.backward_seconds.push_back(totals[kBackward]);
  }
  summary.dp_impl = "mgpu";
  summary.dp_comm = collectives_->name();
  summary.devices = timing.devices;
  if (cuda_graphs_) summary.cuda_graphs = CudaGraphsRecord{!graphs_.empty(), replays_, eager_calls_};
  timing.reduce_seconds = primary[kReduce];
  timing.step_seconds = primary[kStep];
  timing.broadcast_seconds = primary[kBroadcast];
  timing.forward_backward_calls = forward_backward_calls_;
  timing.broadcasts = timers_[0].counts()[kBroadcast];
  summary.dp_timing = std::move(timing);
}

std::string ReplicatedDataParallel::Describe() const {
  std::vector<std::string> names;
  for (const auto& device : devices_) names.push_back(DeviceLabel(device));
  return fmt::format("mgpu: {} replicas on {} (primary {}), one thread per device{}, gradients reduced by {}",
                     devices_.size(), fmt::join(names, ","), names[0],
                     cuda_graphs_ ? fmt::format(", forward + backward as CUDA graphs after {} eager steps",
                                                kEagerCallsBeforeCapture)
                                  : "",
                     collectives_->name());
}

}  // namespace mgpu
