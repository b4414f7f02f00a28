// CapturedGraph: a function of tensors captured once as a CUDA graph, then replayed on new
// inputs of the same shapes (the single-device --cuda-graphs step, worker/graphed_step.h, and
// each replica's forward + backward under --mode dp --cuda-graphs).
//
// Capture runs the body once on the device's current stream, or, when that is the default
// stream (which CUDA cannot capture), on a side stream ordered after it, with copies of the
// example inputs as the graph's static inputs; nothing is computed then. Replay copies new
// inputs into those static inputs and launches the graph on the current stream, so it is
// ordered like eager work. The body must not synchronize with the host, and every tensor it
// reads besides its inputs (parameters, gradients, optimizer state) must keep its storage
// across replays.
//
// Capture uses CUDA's global capture mode: while it runs, no other thread of the process may
// call into CUDA APIs that are unsafe under capture (allocation, synchronization), so capture
// replicas one at a time; threads that must (NCCL's watchdog) relax their own capture mode.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

class CapturedGraph {
 public:
  // The captured computation: the static inputs in, one output tensor out.
  using Body = std::function<torch::Tensor(const std::vector<torch::Tensor>& inputs)>;

  // Captures body on `device` with copies of `examples` (on `device`, memory format kept) as its
  // inputs. Throws Error (exit 1) naming `flag` and saying to run without it when capture fails.
  CapturedGraph(const std::vector<torch::Tensor>& examples, const Body& body, torch::Device device,
                const std::string& flag);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Whether `inputs` have the static inputs' shapes and dtypes, so Replay can take them.
  bool Fits(const std::vector<torch::Tensor>& inputs) const;

  // Copies `inputs` (any device; pinned host memory copies asynchronously) into the static
  // inputs and replays the graph on the current stream. Returns the body's output as a tensor
  // of its own: the next replay does not overwrite it.
  torch::Tensor Replay(const std::vector<torch::Tensor>& inputs);

 private:
  struct State;  // the CUDA graph, its static inputs and its output
  std::unique_ptr<State> state_;
};

}  // namespace mgpu
