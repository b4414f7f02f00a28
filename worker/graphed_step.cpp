#include "worker/graphed_step.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/status.h"
#include "dataparallel/data_parallel.h"

namespace mgpu {

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
}

torch::Tensor GraphedTrainStep::Run(const torch::Tensor& images, const torch::Tensor& labels, bool capturing) {
  if (ddp_) {
    ddp_->ZeroGrad();
    ddp_->PrepareForward();
  } else {
    optimizer_.ZeroGrad();
  }
  // float32 logits, so the loss is float32 under every policy (GradScaler::Scale needs it).
  const torch::Tensor logits = PolicyForward(model_, images, precision_, /*autocast_cache=*/!capturing);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing_));  // ()
  scaler_.Scale(loss).backward();
  if (ddp_) ddp_->FinishBackward();  // every rank's averaged gradients, before the scaler reads them
  torch::NoGradGuard no_grad;
  scaler_.Step(optimizer_, skip_nonfinite_ ? loss.detach().isfinite().logical_not() : torch::Tensor());
  scaler_.Update();
  return loss.detach();
}

torch::Tensor GraphedTrainStep::Step(const torch::Tensor& images, const torch::Tensor& labels) {
  // Capture at a full-sized batch (not an epoch's short last one), which runs nothing yet; under
  // DDP once its buckets are final (rebuilding them synchronizes with the host).
  if (!graph_ && eager_steps_ >= kEagerSteps && images.size(0) >= largest_batch_ && (!ddp_ || ddp_->rebuilt())) {
    graph_ = std::make_unique<CapturedGraph>(
        std::vector<torch::Tensor>{images, labels},
        [this](const std::vector<torch::Tensor>& in) { return Run(in[0], in[1], /*capturing=*/true); }, device_,
        "--cuda-graphs");
  }
  if (!graph_ || !graph_->Fits({images, labels})) {
    ++eager_steps_;
    largest_batch_ = std::max(largest_batch_, images.size(0));
    return Run(images, labels, /*capturing=*/false);
  }
  ++replays_;
  if (!ddp_) return graph_->Replay({images, labels});
  torch::Tensor loss;
  ddp_->LaunchCaptured([&] { loss = graph_->Replay({images, labels}); });
  return loss;
}

}  // namespace mgpu
