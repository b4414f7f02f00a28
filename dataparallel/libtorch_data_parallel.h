// --dp-impl libtorch: LibTorch's stock torch::nn::parallel::data_parallel, every step, as a
// baseline for mgpu's engine. Each call clones the model onto every device (Module::clone),
// scatters the batch, runs the replicas through parallel_apply (threads of the intra-op pool),
// gathers the logits on the primary, where the loss is computed; backward sums the replicas'
// gradients into the primary model (ReduceAdd, one parameter at a time). Nothing is kept between
// steps, so SyncReplicas has nothing to do.
//
// Our models are not nn::Cloneable; a wrapper module provides clone() by building the same
// architecture and copying parameters and buffers, which is what Cloneable::clone does. The
// wrapper's forward applies the precision policy, autocast included, on whichever thread runs it.
// Batch norm: every replica is a copy, so the primary's running statistics are never updated
// (a limitation of LibTorch's data_parallel; nn.DataParallel shares the first replica's buffers).
// CUDA devices only: the scatter is torch::cuda::scatter.
#pragma once

#include <memory>

#include "cuda/device_timer.h"
#include "dataparallel/data_parallel.h"

namespace mgpu {

class LibTorchDataParallel : public DataParallelEngine {
 public:
  // Throws BadInputError for CPU devices.
  LibTorchDataParallel(std::shared_ptr<Classifier> primary, DataParallelOptions options);
  ~LibTorchDataParallel() override;

  torch::Tensor ForwardBackward(const torch::Tensor& images, const torch::Tensor& labels, const GradScaler& scaler,
                                double loss_weight) override;
  void SyncReplicas() override;
  void Report(RunSummary& summary) override;
  std::string Describe() const override;

 private:
  enum Interval : size_t { kForward, kBackward, kStep, kIntervals };
  class Replicable;

  std::vector<torch::Device> devices_;
  double label_smoothing_;  // of the training loss
  std::shared_ptr<Replicable> module_;
  DeviceTimer timer_;  // the primary's stream: data_parallel's whole forward, backward, step
  int64_t forward_backward_calls_ = 0;
};

}  // namespace mgpu
