// mgpu's DataParallel engine (--dp-impl mgpu, data_parallel.h):
//   - replicas built once (the same architecture, from DataParallelOptions::make_model) and
//     kept for the run; replica 0 is the primary model itself;
//   - every replica's parameters and buffers are views of flat per-dtype buffers (the primary's
//     too, so a broadcast packs nothing), and every replica has flat gradient buffers, so a
//     reduction or a broadcast is one collective per dtype group;
//   - one persistent thread per extra device (ReplicaThreads) runs forward and backward on its
//     slice, with the precision policy's autocast on that thread; the calling thread runs the
//     primary's slice;
//   - gradients are summed onto the primary (NCCL reduce on GPUs, additions on CPUs), the
//     trainer steps the primary, and SyncReplicas broadcasts parameters and buffers back.
// Batch norm: as torch.nn.DataParallel, whose replica on the first device shares the module's
// buffers, the running statistics are those the primary's slice updates; the replicas'
// updates are overwritten by the next broadcast. Gradient accumulation (--grad-accum) reduces
// after every micro-batch into the primary's accumulating gradients.
//
// A small model's step is launch-bound (a replica's half of a LeNet batch costs as much host
// time to launch as the whole batch does on one device), so the eager step spends no launches
// it can avoid: backward starts from a cached seed gradient (no multiplication node), lets
// autograd allocate each replica's gradients and copies them into the flat buffer in one
// multi-tensor launch (instead of an in-place addition per parameter), the slices' losses are
// summed by the gradients' reduction, and the replica threads spin briefly instead of sleeping
// between jobs (replica_threads.h).
//
// --cuda-graphs: after kEagerCallsBeforeCapture eager calls, the next call with a full-sized
// batch captures every replica's forward + backward on its slice as a CUDA graph (one replica
// at a time), accumulating into the flat gradient buffers, and later calls with that batch
// size replay them, each on its own thread; other batch sizes (an epoch's last) run eagerly.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "cuda/captured_graph.h"
#include "cuda/device_timer.h"
#include "dataparallel/data_parallel.h"
#include "dataparallel/replica_collectives.h"
#include "dataparallel/replica_threads.h"
#include "ddp/flat_buffers.h"

namespace mgpu {

class ReplicatedDataParallel : public DataParallelEngine {
 public:
  ReplicatedDataParallel(std::shared_ptr<Classifier> primary, DataParallelOptions options);

  torch::Tensor ForwardBackward(const torch::Tensor& images, const torch::Tensor& labels, const GradScaler& scaler,
                                double loss_weight) override;
  void SyncReplicas() override;
  void Report(RunSummary& summary) override;
  std::string Describe() const override;

 private:
  enum Interval : size_t { kForward, kBackward, kReduce, kStep, kBroadcast, kIntervals };
  static constexpr int64_t kEagerCallsBeforeCapture = 3;

  // Replica r's forward and backward on its slice, images (b, C, H, W) and labels (b) on its
  // device: adds to its gradients those of the slice's summed loss × seed (a () float32 tensor
  // on its device: the loss factor, times the loss scale when scaling) and returns the summed
  // loss (). `timer`: splits forward from backward when eager; null under capture.
  torch::Tensor SliceForwardBackward(size_t replica, const torch::Tensor& images, const torch::Tensor& labels,
                                     const torch::Tensor& seed, DeviceTimer* timer);
  // The seed of replica r's eager backward for `loss_factor` and `scale` (undefined: none).
  torch::Tensor BackwardSeed(size_t replica, double loss_factor, const torch::Tensor& scale);

  // Makes replica r's .grad the views of its flat gradient buffers, keeping the values of
  // gradients already there (the trainer's ZeroGrad sets the primary's to none).
  void AttachGradients(size_t replica);
  // After an eager backward: replica r's gradients into its flat buffers (zero where a
  // parameter got none; gradients that are views already stay); the primary's .grad become
  // the views, a replica's are dropped so that its next backward allocates them afresh (a
  // replica's .grad are none between jobs, from construction and after a capture too).
  void CollectGradients(size_t replica);
  // Whether the primary's parameters and buffers are still the views of state_[0].
  bool PrimaryIsFlat() const;
  void Broadcast();

  std::vector<torch::Device> devices_;
  Precision precision_;
  double label_smoothing_;
  std::vector<std::shared_ptr<Classifier>> replicas_;    // [0]: the primary
  std::vector<std::vector<torch::Tensor>> parameters_;  // per replica
  std::vector<torch::Tensor> primary_state_;            // the primary's parameters, then buffers
  std::vector<FlatBuffers> gradients_;                   // per replica
  // Per replica: its parameters and buffers, which are views of it (the primary's unless
  // something replaced their storage, e.g. a load that assigned new tensors: then they are
  // packed into state_[0] before each broadcast).
  std::vector<FlatBuffers> state_;
  // Per replica: the cached seed of its eager backward without loss scaling, and its factor.
  std::vector<torch::Tensor> seeds_;
  std::vector<double> seed_factors_;
  std::unique_ptr<ReplicaCollectives> collectives_;
  std::vector<DeviceTimer> timers_;  // per replica; reduce, step and broadcast on [0]
  bool replicas_stale_ = true;       // the primary may differ from the replicas
  int64_t forward_backward_calls_ = 0;
  // --cuda-graphs: per replica, its forward + backward (inputs: images, labels and, with loss
  // scaling, the scale; output: the summed loss), captured for one global batch size and loss
  // factor; empty before capture.
  bool cuda_graphs_;
  std::vector<std::unique_ptr<CapturedGraph>> graphs_;
  int64_t graph_batch_ = 0;
  double graph_loss_factor_ = 0;
  int64_t largest_eager_batch_ = 0;
  int64_t replays_ = 0, eager_calls_ = 0;
  std::mutex capture_mutex_;  // replicas capture one at a time (captured_graph.h)
  ReplicaThreads threads_;  // last: its threads stop before the members they use go away
};

}  // namespace mgpu
