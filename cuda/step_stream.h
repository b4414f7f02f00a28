// StepStreamScope: the stream a training thread's steps run on, for the whole session.
//
// While alive, the thread's current stream on the device is one from LibTorch's pool instead of
// the default stream. Two runs need that:
//
// - A graphed DDP step (worker/graphed_step.h) is captured on the stream its eager steps ran on:
//   DDP's gradient accumulators remember the stream they were created on, and the default stream
//   cannot wait on a capture.
// - A run that may decode its JPEGs on the GPU (--decode gpu|auto, data/gpu_jpeg_batches.h) runs
//   the decode's kernels (nvJPEG's conversions, the crop resizes) on side streams of the default
//   priority beside the step. With kHigh (LibTorch's high-priority pool) the step's kernels come
//   first, and its collectives' too (ddp/nccl_communicator.h: CUDA's greatest priority): the
//   block scheduler starts a waiting block of a higher-priority stream before one of a lower, so
//   the decode, which runs batches ahead, fills the gaps instead of delaying the step. Measured
//   on 2x H200 (ResNet-18 at 224, amp-bf16, in-run rates against synthetic data's,
//   bench/results/2026-11-28-2xH200-step-priority/): one GPU with 12 loader threads 93.0% ->
//   95.9% (means of 3 and 5 runs), with 4 threads 85.6% -> 92.1% (3 and 7), DDP on 2 with 12
//   threads per rank 90.7% -> 92.0% (3 and 6). Without the decode the high priority cost one
//   GPU about 1% (two pairs), so other runs keep the default.
//
// Nothing on a CPU device.
#pragma once

#include <memory>

#include <torch/torch.h>

namespace mgpu {

enum class StreamPriority { kDefault, kHigh };

class StepStreamScope {
 public:
  StepStreamScope(torch::Device device, StreamPriority priority);
  ~StepStreamScope();
  StepStreamScope(const StepStreamScope&) = delete;
  StepStreamScope& operator=(const StepStreamScope&) = delete;

  StreamPriority priority() const { return priority_; }

 private:
  const StreamPriority priority_;
  struct State;  // the stream guard
  std::unique_ptr<State> state_;
};

}  // namespace mgpu
