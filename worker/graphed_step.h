// The whole single-device training step as one CUDA graph (--cuda-graphs).
//
// A step is: zero the gradients, forward under the precision policy, cross-entropy, scaled
// backward, the loss scaler's check and the fused optimizer step, the scale update. Under autocast
// the weights' casts both ways are batched (amp/low_precision_weights.h). For a small
// model each of those is a few microseconds of GPU work behind tens of microseconds of host-side
// dispatch per kernel; replaying a captured graph launches all of them at once.
//
// The first kEagerSteps steps run eagerly (cuDNN picks its algorithms, the optimizer creates its
// state, the allocator warms up); the next full-sized step captures the graph on a side stream and every
// later step with a batch of the captured shape copies the batch into the graph's input buffers
// and replays it on the current stream. A batch of another shape (an epoch's last, partial
// batch) runs eagerly, which the graph does not notice. The learning rate lives in a device
// tensor (FusedOptimizer::KeepLrOnDevice) so schedules keep working.
//
// Under DDP (NCCL) the step also holds DDP's part: buffers broadcast before the forward, the
// bucket copies and all-reduces launched by backward's hooks, the wait for them before the
// optimizer. Every rank captures at the same step (their batches have the same sizes), the graph
// is captured only once DDP has rebuilt its buckets (after the first step), and replays go
// through DistributedDataParallel::LaunchCaptured, so a rank that stops replaying makes the
// others fail at the collective timeout instead of waiting forever.
//
// With --data-on-device the batch is gathered inside the graph as well (GatherFrom): its only
// input is then the batch's sample indices, and the epoch's running loss sums are added to on
// the device by the step itself (SumLossesInto), so a replayed step costs the host one copy of
// B indices and one graph launch.
//
// Requirements (TrainConfig validation refuses the rest): one CUDA device per process, no
// DataParallel, one micro-batch per step, no gradient clipping (it reads the norm on the host),
// no float32 master weights (o2). Nothing in the step may synchronize with the host.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "amp/grad_scaler.h"
#include "amp/low_precision_weights.h"
#include "amp/precision.h"
#include "cuda/captured_graph.h"
#include "data/device_resident_batches.h"
#include "ddp/distributed_data_parallel.h"
#include "models/classifier.h"
#include "optim/fused_optimizer.h"

namespace mgpu {

class GraphedTrainStep {
 public:
  static constexpr int kEagerSteps = 3;

  // All references must outlive this object. `skip_nonfinite`: a non-finite loss makes the
  // scaler skip the step (--on-nonfinite skip), decided on the device. `ddp`: the model's DDP
  // wrapper (--mode ddp), or null.
  GraphedTrainStep(Classifier& model, FusedOptimizer& optimizer, GradScaler& scaler, Precision precision,
                   double label_smoothing, bool skip_nonfinite, torch::Device device,
                   DistributedDataParallel* ddp = nullptr);
  GraphedTrainStep(const GraphedTrainStep&) = delete;
  GraphedTrainStep& operator=(const GraphedTrainStep&) = delete;

  // One optimizer step on images (B, C, H, W) and labels (B) on the device. Returns the step's
  // loss, () float32, in a tensor of its own (the next step does not overwrite it). Throws
  // Error, saying to run without --cuda-graphs, when capturing fails.
  torch::Tensor Step(const torch::Tensor& images, const torch::Tensor& labels);

  // Batches come from `source` (which must outlive this object) as sample indices
  // (DeviceResidentBatches::DeferGather is called here): StepOnSamples gathers them inside the
  // step, in the source's memory format.
  void GatherFrom(DeviceResidentBatches& source);
  // As Step, on the batch of `sample_indices` ((B) int64 on the device) of the GatherFrom source.
  torch::Tensor StepOnSamples(const torch::Tensor& sample_indices);

  // From now on every step adds its loss to the epoch's running sums, as the eager loop does
  // (loss x batch images to `loss_sum`, the batch's images to `loss_images`; with
  // skip_nonfinite, only a finite loss): the step keeps sums of its own at fixed addresses
  // (the graph writes there), takes the values of `loss_sum` and `loss_images` ((), float64,
  // on the device or the host) and points both at its sums, so the caller reads and zeroes
  // the sums the steps add to.
  void SumLossesInto(torch::Tensor& loss_sum, torch::Tensor& loss_images);

  // For summary.json: whether a graph was captured, and how many steps replayed it or ran eagerly.
  bool captured() const { return graph_ != nullptr; }
  int64_t replays() const { return replays_; }
  int64_t eager_steps() const { return eager_steps_; }
  // Whether the forward uses low-precision copies of the weights (amp/low_precision_weights.h).
  bool batches_weight_casts() const { return low_precision_ != nullptr; }

 private:
  // The step on {images, labels} or {sample_indices}, replayed when it fits the graph.
  torch::Tensor StepOn(const std::vector<torch::Tensor>& inputs);
  // The step itself on either input form, eager or under capture; returns the loss ().
  torch::Tensor RunOn(const std::vector<torch::Tensor>& inputs, bool capturing);
  torch::Tensor Run(const torch::Tensor& images, const torch::Tensor& labels, bool capturing);
  // After backward: DDP's averages, the loss scaler's check and the optimizer step (per bucket where it can).
  void StepOptimizer(const torch::Tensor& nonfinite);

  Classifier& model_;
  FusedOptimizer& optimizer_;
  GradScaler& scaler_;
  Precision precision_;
  double label_smoothing_;
  bool skip_nonfinite_;
  torch::Device device_;
  DistributedDataParallel* ddp_;
  DeviceResidentBatches* gather_source_ = nullptr;
  // Under autocast, the Conv2d and Linear weights' casts as multi-tensor copies (a step's forward
  // one; backward one, or DDP's buckets; amp/low_precision_weights.h); null without autocast or
  // without such modules.
  std::unique_ptr<LowPrecisionWeights> low_precision_;
  std::vector<size_t> optimizer_index_;  // under DDP: per DDP parameter, its index in the optimizer
  torch::Tensor loss_sum_;     // () float64 on the device: the running sum of loss x images
  torch::Tensor loss_images_;  // () float64 on the device: the images whose loss is in loss_sum_

  // inputs: images (B, C, H, W) and labels (B), or sample indices (B); output: the loss ()
  std::unique_ptr<CapturedGraph> graph_;
  int64_t replays_ = 0;
  int64_t eager_steps_ = 0;
  int64_t largest_batch_ = 0;  // of the eager steps: the graph is captured for this size
};

}  // namespace mgpu
