#include "worker/graphed_step.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "common/status.h"
#include "dataparallel/data_parallel.h"

namespace mgpu {
namespace {

// Per DDP parameter, its position among the optimizer's: the graphed step keeps no float32 masters
// (TrainConfig refuses o2), so the optimizer steps the model's parameters themselves.
std::vector<size_t> OptimizerIndices(const std::vector<torch::Tensor>& ddp_parameters,
                                     const std::vector<torch::Tensor>& stepped) {
  std::vector<size_t> indices;
  for (const auto& parameter : ddp_parameters) {
    const auto found = std::find_if(stepped.begin(), stepped.end(),
                                    [&](const torch::Tensor& p) { return p.is_same(parameter); });
    if (found == stepped.end()) {
      throw Error(ExitCode::kFailure, "--cuda-graphs with DDP: a parameter DDP reduces is not one the optimizer steps");
    }
    indices.push_back(static_cast<size_t>(found - stepped.begin()));
  }
  return indices;
}

}  // namespace

GraphedTrainStep::GraphedTrainStep(Classifier& model, FusedOptimizer& optimizer, GradScaler& scaler,
                                   Precision precision, double label_smoothing, bool skip_nonfinite,
                                   torch::Device device, DistributedDataParallel* ddp)
    : model_(model),
      optimizer_(optimizer),
      scaler_(scaler),
      precision_(precision),
      label_smoothing_(label_smoothing),
      skip_nonfinite_(skip_nonfinite),
      device_(device),
      ddp_(ddp) {
#ifndef MGPU_WITH_CUDA
  throw BadInputError("--cuda-graphs: this mgpu was built against a LibTorch without CUDA");
#endif
  if (!device_.is_cuda()) {
    throw BadInputError(fmt::format("--cuda-graphs needs a CUDA device, but this run trains on {}; "
                                    "drop --cuda-graphs or pick --device cuda",
                                    device_.str()));
  }
  optimizer_.KeepLrOnDevice();
  if (AutocastDtype(precision_)) low_precision_ = LowPrecisionWeights::Of(model_, *AutocastDtype(precision_));
  if (low_precision_ && ddp_) {
    low_precision_->ForEachPair([&](const torch::Tensor& parameter, const torch::Tensor& copy) {
      ddp_->ReceiveGradientThrough(parameter, copy);
    });
  }
  if (ddp_) optimizer_index_ = OptimizerIndices(ddp_->parameters(), optimizer_.stepped_parameters());
  const auto sum_options = torch::TensorOptions().dtype(torch::kDouble).device(device_);
  loss_sum_ = torch::zeros({}, sum_options);
  loss_images_ = torch::zeros({}, sum_options);
}

void GraphedTrainStep::GatherFrom(DeviceResidentBatches& source) {
  source.DeferGather();
  gather_source_ = &source;
}

void GraphedTrainStep::SumLossesInto(torch::Tensor& loss_sum, torch::Tensor& loss_images) {
  torch::NoGradGuard no_grad;
  loss_sum_.copy_(loss_sum);
  loss_images_.copy_(loss_images);
  loss_sum = loss_sum_;
  loss_images = loss_images_;
}

torch::Tensor GraphedTrainStep::Run(const torch::Tensor& images, const torch::Tensor& labels, bool capturing) {
  if (ddp_) {
    ddp_->ZeroGrad();
    ddp_->PrepareForward();
  } else {
    optimizer_.ZeroGrad();
  }
  // float32 logits, so the loss is float32 under every policy (GradScaler::Scale needs it).
  const torch::Tensor logits = [&] {
    std::optional<LowPrecisionWeights::InForward> batched_casts;
    if (low_precision_) batched_casts.emplace(*low_precision_);
    return PolicyForward(model_, images, precision_, /*autocast_cache=*/!capturing);
  }();
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing_));  // ()
  scaler_.Scale(loss).backward();
  if (low_precision_ && !ddp_) low_precision_->CollectGradients();  // DDP's buckets take them instead
  const torch::Tensor nonfinite = [&] {
    torch::NoGradGuard no_grad;
    return skip_nonfinite_ ? loss.detach().isfinite().logical_not() : torch::Tensor();  // ()
  }();
  StepOptimizer(nonfinite);
  torch::NoGradGuard no_grad;
  // The epoch's running loss, with the eager loop's operations (so its sums round alike).
  const auto batch_images = static_cast<double>(images.size(0));
  if (skip_nonfinite_) {
    loss_sum_.add_(loss.detach().masked_fill(nonfinite, 0), batch_images);
    loss_images_.add_(nonfinite.logical_not(), batch_images);
  } else {
    loss_sum_.add_(loss.detach(), batch_images);
    loss_images_.add_(batch_images);
  }
  return loss.detach();
}

// Without DDP, or under loss scaling (whose check reads every gradient first), the optimizer steps
// once every rank's gradients are averaged. Otherwise it steps each bucket's parameters once that
// bucket's all-reduce is done, so the last buckets' all-reduces run beside the earlier ones' steps
// instead of before all of them.
void GraphedTrainStep::StepOptimizer(const torch::Tensor& nonfinite) {
  if (ddp_ == nullptr || scaler_.enabled()) {
    if (ddp_) ddp_->FinishBackward();
    torch::NoGradGuard no_grad;
    scaler_.Step(optimizer_, nonfinite);
  } else {
    const std::optional<torch::Tensor> found_inf = scaler_.BeginStepInParts(nonfinite);
    ddp_->FinishBackward([&](const std::vector<size_t>& members) {
      std::vector<size_t> indices;
      for (size_t member : members) indices.push_back(optimizer_index_[member]);
      optimizer_.StepParameters(indices, std::nullopt, found_inf);
    });
  }
  scaler_.Update();
}

torch::Tensor GraphedTrainStep::RunOn(const std::vector<torch::Tensor>& inputs, bool capturing) {
  if (inputs.size() == 2) return Run(inputs[0], inputs[1], capturing);
  const Batch batch = gather_source_->Gather(inputs[0]);
  return Run(batch.images, batch.labels, capturing);
}

torch::Tensor GraphedTrainStep::Step(const torch::Tensor& images, const torch::Tensor& labels) {
  return StepOn({images, labels});
}

torch::Tensor GraphedTrainStep::StepOnSamples(const torch::Tensor& sample_indices) {
  if (gather_source_ == nullptr) {
    throw Error(ExitCode::kFailure, "GraphedTrainStep::StepOnSamples needs a GatherFrom source first");
  }
  return StepOn({sample_indices});
}

torch::Tensor GraphedTrainStep::StepOn(const std::vector<torch::Tensor>& inputs) {
  const int64_t batch_size = inputs[0].size(0);
  // Capture at a full-sized batch (not an epoch's short last one), which runs nothing yet; under
  // DDP once its buckets are final (rebuilding them synchronizes with the host).
  if (!graph_ && eager_steps_ >= kEagerSteps && batch_size >= largest_batch_ && (!ddp_ || ddp_->rebuilt())) {
    graph_ = std::make_unique<CapturedGraph>(
        inputs, [this](const std::vector<torch::Tensor>& in) { return RunOn(in, /*capturing=*/true); }, device_,
        "--cuda-graphs");
  }
  if (!graph_ || !graph_->Fits(inputs)) {
    ++eager_steps_;
    largest_batch_ = std::max(largest_batch_, batch_size);
    return RunOn(inputs, /*capturing=*/false);
  }
  ++replays_;
  if (!ddp_) return graph_->Replay(inputs);
  torch::Tensor loss;
  ddp_->LaunchCaptured([&] { loss = graph_->Replay(inputs); });
  return loss;
}

}  // namespace mgpu
