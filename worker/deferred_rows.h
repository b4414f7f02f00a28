// Metrics rows completed behind the device, so that writing one never drains its queue.
//
// Reading a loss from the device waits for every kernel queued before it; done at each metrics
// row, that leaves the GPU idle while the host writes the row and queues the next step (measured
// as `input` time). Instead, when the loop adds a row, the row's device values (the last loss,
// the loss scale, whether every loss since the previous row is finite) are copied into pinned
// host memory behind the work already queued, and its phase times are a TimelineWindow; the row
// is complete once the device has passed that point. The loop takes the complete rows at every
// step without waiting, and waits for all of them only where it synchronizes anyway (the end of
// an epoch, a checkpoint). On the CPU a row is complete when it is added.
//
// A row's step time is the device time of its steps (the sum of its phases), so it includes the
// device's idle time and leaves out nothing the host did between its steps.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "worker/run_outputs.h"
#include "worker/step_timeline.h"

namespace mgpu {

// The losses of a window's micro-batches, to be checked for a non-finite one.
struct WindowLosses {
  std::vector<torch::Tensor> losses;  // () each, on the training device
  std::vector<int64_t> steps;         // the optimizer step each loss belongs to
  std::vector<torch::Tensor> scales;  // () each: the loss scale then; empty without loss scaling
  bool empty() const { return losses.empty(); }
};

// The first non-finite loss of a window.
struct NonFiniteLoss {
  int64_t step = 0;
  double loss = 0;
  double loss_scale = 1;
};

// The first non-finite loss of `window`, or nullopt. Synchronizes with the device.
std::optional<NonFiniteLoss> FirstNonFiniteLoss(const WindowLosses& window);

class DeferredRows {
 public:
  // What the host knows of a row when it is added.
  struct HostPart {
    StepMetrics metrics;     // step, epoch, lr, data_wait_seconds, elapsed_seconds; the rest is filled in here
    int64_t steps = 0;       // optimizer steps since the previous row
    int64_t images = 0;      // images of those steps over every rank
  };
  struct Completed {
    StepMetrics metrics;
    PhaseSeconds window_seconds;             // the window's phases in total (not per step)
    PhaseSeconds host_window_seconds;        // the same on the host clock (TimelineWindow::HostSeconds)
    std::optional<NonFiniteLoss> nonfinite;  // set when the window had a non-finite loss
  };

  // On a GPU, runs the path of a row once per kind of row before training (see the .cpp).
  explicit DeferredRows(const torch::Device& device);
  ~DeferredRows();

  // Adds a row ending at the current point of the current stream. `last_loss` and `loss_scale`
  // are () tensors on the training device; `losses` may be empty (nothing to check).
  void Add(HostPart host, const torch::Tensor& last_loss, const torch::Tensor& loss_scale, TimelineWindow timeline,
           WindowLosses losses);
  // The complete rows, oldest first, up to the first incomplete one; with `wait`, every row.
  std::vector<Completed> Take(bool wait);

 private:
  struct Pending;
  std::deque<std::unique_ptr<Pending>> pending_;
};

}  // namespace mgpu
