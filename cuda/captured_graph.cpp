#include "cuda/captured_graph.h"

#include <fmt/format.h>

#include "common/status.h"

#ifdef MGPU_WITH_CUDA
#include <cuda_runtime.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mgpu {

struct CapturedGraph::State {
#ifdef MGPU_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  std::vector<torch::Tensor> inputs;  // each replay's inputs, copied in before it
  torch::Tensor output;               // written by each replay
};

CapturedGraph::CapturedGraph(const std::vector<torch::Tensor>& examples, const Body& body, torch::Device device,
                             const std::string& flag) {
#ifndef MGPU_WITH_CUDA
  (void)examples, (void)body, (void)device;
  throw BadInputError(fmt::format("{}: this mgpu was built against a LibTorch without CUDA", flag));
#else
  if (!device.is_cuda()) {
    throw BadInputError(fmt::format("{} needs CUDA devices, not {}; drop {}", flag, device.str(), flag));
  }
  auto state = std::make_unique<State>();
  c10::cuda::CUDAGuard on_device(device);
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& example : examples) {
    state->inputs.push_back(example.to(device, /*non_blocking=*/true).clone());  // clone keeps the memory format
  }
  // Capture needs a stream other than the default one, and must see everything queued before.
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
  const c10::cuda::CUDAStream capture_stream = current == c10::cuda::getDefaultCUDAStream(device.index())
                                                   ? c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())
                                                   : current;
  c10::cuda::CUDAEvent ready;
  ready.record(current);
  ready.block(capture_stream);
  try {
    c10::cuda::CUDAStreamGuard on_capture_stream(capture_stream);
    // Thread-local: other threads may go on with their CUDA work meanwhile (the --decode gpu
    // producer's nvJPEG calls and stream polls), which under the global mode would invalidate the
    // capture or fail themselves.
    state->graph.capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
    {
      torch::AutoGradMode grad_enabled(true);  // the body may run backward
      state->output = body(state->inputs);
    }
    state->graph.capture_end();
  } catch (const std::exception& e) {
    // Out of capture mode, so the error can be reported and the process end normally.
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(capture_stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t abandoned = nullptr;
      cudaStreamEndCapture(capture_stream.stream(), &abandoned);
      if (abandoned != nullptr) cudaGraphDestroy(abandoned);
    }
    throw Error(ExitCode::kFailure, fmt::format("{}: capturing a CUDA graph on {} failed ({}); run without {}", flag,
                                                device.str(), e.what(), flag));
  }
  c10::cuda::CUDAEvent captured;
  captured.record(capture_stream);
  captured.block(current);
  state_ = std::move(state);
#endif
}

CapturedGraph::~CapturedGraph() = default;

bool CapturedGraph::Fits(const std::vector<torch::Tensor>& inputs) const {
  if (inputs.size() != state_->inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].sizes() != state_->inputs[i].sizes() || inputs[i].dtype() != state_->inputs[i].dtype()) return false;
  }
  return true;
}

torch::Tensor CapturedGraph::Replay(const std::vector<torch::Tensor>& inputs) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) state_->inputs[i].copy_(inputs[i], /*non_blocking=*/true);
#ifdef MGPU_WITH_CUDA
  state_->graph.replay();
#endif
  return state_->output.clone();
}

}  // namespace mgpu
