#include "worker/graphed_step.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/status.h"
#include "dataparallel/data_parallel.h"

#ifdef MGPU_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAEvent.h>
#endif

namespace mgpu {

struct GraphedTrainStep::Graph {
#ifdef MGPU_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  torch::Tensor images;  // (B, C, H, W): each replay's input, copied in before it
  torch::Tensor labels;  // (B)
  torch::Tensor loss;    // (): written by each replay
};

GraphedTrainStep::GraphedTrainStep(Classifier& model, FusedOptimizer& optimizer, GradScaler& scaler,
                                   Precision precision, double label_smoothing, bool skip_nonfinite,
                                   torch::Device device)
    : model_(model),
      optimizer_(optimizer),
      scaler_(scaler),
      precision_(precision),
      label_smoothing_(label_smoothing),
      skip_nonfinite_(skip_nonfinite),
      device_(device) {
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

GraphedTrainStep::~GraphedTrainStep() = default;

bool GraphedTrainStep::captured() const { return graph_ != nullptr; }

torch::Tensor GraphedTrainStep::Run(const torch::Tensor& images, const torch::Tensor& labels, bool capturing) {
  optimizer_.ZeroGrad();
  // float32 logits, so the loss is float32 under every policy (GradScaler::Scale needs it).
  const torch::Tensor logits = PolicyForward(model_, images, precision_, /*autocast_cache=*/!capturing);
  const torch::Tensor loss = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing_));  // ()
  scaler_.Scale(loss).backward();
  torch::NoGradGuard no_grad;
  scaler_.Step(optimizer_, skip_nonfinite_ ? loss.detach().isfinite().logical_not() : torch::Tensor());
  scaler_.Update();
  return loss.detach();
}

void GraphedTrainStep::Capture(const torch::Tensor& images, const torch::Tensor& labels) {
#ifdef MGPU_WITH_CUDA
  auto graph = std::make_unique<Graph>();
  graph->images = images.clone();  // keeps the memory format (channels-last stays channels-last)
  graph->labels = labels.clone();
  // Capture needs a stream other than the default one, and must see everything queued before.
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
  const c10::cuda::CUDAStream capture_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
  c10::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(capture_stream);
  try {
    c10::cuda::CUDAStreamGuard on_capture_stream(capture_stream);
    graph->graph.capture_begin();
    graph->loss = Run(graph->images, graph->labels, /*capturing=*/true);
    graph->graph.capture_end();
  } catch (const std::exception& e) {
    throw Error(ExitCode::kFailure,
                fmt::format("--cuda-graphs: capturing the training step failed ({}); run without --cuda-graphs",
                            e.what()));
  }
  c10::cuda::CUDAEvent captured;
  captured.record(capture_stream);
  captured.block(current);
  graph_ = std::move(graph);
#endif
}

torch::Tensor GraphedTrainStep::Step(const torch::Tensor& images, const torch::Tensor& labels) {
  // Capture at a full-sized batch (not an epoch's short last one), which runs nothing yet.
  if (!graph_ && eager_steps_ >= kEagerSteps && images.size(0) >= largest_batch_) Capture(images, labels);
  const bool fits = graph_ && graph_->images.sizes() == images.sizes() && graph_->labels.sizes() == labels.sizes();
  if (!fits) {
    ++eager_steps_;
    largest_batch_ = std::max(largest_batch_, images.size(0));
    return Run(images, labels, /*capturing=*/false);
  }
#ifdef MGPU_WITH_CUDA
  torch::NoGradGuard no_grad;
  graph_->images.copy_(images, /*non_blocking=*/true);
  graph_->labels.copy_(labels, /*non_blocking=*/true);
  graph_->graph.replay();
  ++replays_;
#endif
  return graph_->loss.clone();
}

}  // namespace mgpu
