// DistributedDataParallel for LibTorch modules: gradients averaged across ranks by bucketed
// all-reduces that overlap the backward pass (PyTorch c10d's reducer, in C++).
//
// Use per training step:
//   ddp.PrepareForward();        // broadcasts buffers from rank 0 (e.g. batch-norm statistics)
//   loss = model->forward(...);  loss.backward();   // hooks launch buckets as gradients arrive
//   ddp.FinishBackward();        // waits for the buckets and writes averaged gradients
//   optimizer.Step();
//
// Construction (collective: every rank, same model) checks parameter names, shapes and dtypes
// across ranks — a mismatch is a BadInputError on every rank naming the first differing
// parameter, never a hang — and copies rank 0's parameters and buffers to every rank. When
// buffers are broadcast before each forward, they are moved into one flat tensor per dtype
// (the module's buffers become views of it), so that broadcast is one collective in place.
//
// Buckets: built in reverse parameter order (first bucket 1 MiB, then the cap, optionally the
// last-ready parameters in a small last bucket: bucket_plan.h), per dtype and device; after the first
// iteration rebuilt once from the order in which gradients became ready on rank 0 (broadcast, so
// every rank agrees). A bucket is launched once all its gradients are in and every earlier bucket
// has been launched, so all ranks launch the same collectives in the same order; its all-reduce
// averages (Communicator::AllReduceMean), so no kernel divides gradients by the world size.
//
// Launches per step, which a short step on a fast GPU pays on the host: ZeroGrad sets gradients
// to none, so autograd's AccumulateGrad keeps the tensor backward made (no kernel), and a bucket's
// gradients are copied into it by one multi-tensor launch just before its all-reduce, instead of
// one in-place addition per parameter into zeroed buckets.
//
// CUDA graphs (nccl, worker/graphed_step.h): once the buckets are rebuilt, a whole step
// (ZeroGrad, PrepareForward, backward, FinishBackward) may be captured; the hooks then record the
// bucket copies and all-reduces into the graph in the same order, and each replay is launched
// through LaunchCaptured so the collective timeout still applies.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/choices.h"
#include "ddp/bucket_plan.h"
#include "ddp/communicator.h"
#include "ddp/flat_buffers.h"

namespace mgpu {

struct DdpOptions {
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;
  int64_t first_bucket_cap_bytes = kFirstBucketCapBytes;
  int64_t last_bucket_cap_bytes = 0;  // > 0: a small last bucket (bucket_plan.h); 0: c10d's plan
  // After FinishBackward the gradients are views of their buckets: nothing is copied back after
  // the all-reduce. False: the averages are copied back into autograd's gradient tensors
  // (PyTorch's default), one multi-tensor copy between the last all-reduce and the optimizer.
  bool gradient_as_bucket_view = true;
  // Parameters that get no gradient in an iteration are reduced as zeros instead of an error.
  bool find_unused_parameters = false;
  // Broadcast rank 0's buffers before every forward.
  bool broadcast_buffers = true;
  // fp16 or bf16: all-reduce buckets in half precision (half the bytes on the wire).
  DdpCompression compression = DdpCompression::kNone;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& communicator, DdpOptions options);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  void PrepareForward();
  // Completes the iteration's gradient reduction: on GPUs without blocking the host (the current
  // stream waits for the buckets). Inside a NoSync scope, does nothing. With `on_bucket_reduced`,
  // calls it per bucket in launch order, with the indices (in the module's parameter order) of
  // the parameters whose gradients are then final: the work it queues on the current stream can
  // run while later buckets' all-reduces still do (an optimizer stepped per bucket).
  void FinishBackward(const std::function<void(const std::vector<size_t>&)>& on_bucket_reduced = nullptr);
  // Clears gradients for the next step: sets them to none (the buckets keep their memory).
  void ZeroGrad();

  // From now on `parameter`'s gradient arrives in `leaf`, a low-precision copy that the forward
  // uses in its place (amp/low_precision_weights.h): the hook moves from the parameter to `leaf`,
  // and at its bucket's launch the leaf's gradient is copied, converted, into the parameter's
  // bucket view with the bucket's other arrivals (one multi-tensor copy per source dtype), then
  // reset. After FinishBackward the parameter's gradient is its bucket view, as without a leaf.
  // Throws if `parameter` is not one of the module's. Call before the first backward; not for
  // steps under NoSync (the leaf's gradient would not be carried to the next step's bucket).
  void ReceiveGradientThrough(const torch::Tensor& parameter, const torch::Tensor& leaf);

  // Runs `replay`, the launch of a CUDA graph that captured a step of this DDP, under the
  // communicator's collective timeout (a rank that stops replaying fails the others, not hangs).
  void LaunchCaptured(const std::function<void()>& replay);

  // While alive, backward passes only accumulate local gradients (gradient accumulation).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.sync_enabled_ = false; }
    ~NoSync() { ddp_.sync_enabled_ = true; }

   private:
    DistributedDataParallel& ddp_;
  };

  // Bucket sizes in bytes, in launch order (for summary.json and tests).
  std::vector<int64_t> BucketBytes() const;
  // Parameter indices per bucket, in launch order.
  std::vector<std::vector<size_t>> BucketMembers() const;
  bool rebuilt() const { return rebuilt_; }
  // The module's parameters, in the order FinishBackward's indices refer to.
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

 private:
  struct Bucket {
    std::vector<size_t> members;
    std::vector<torch::Tensor> views;  // per member: a view of `contents` shaped like the parameter
    torch::Tensor contents;            // (total elements) flat
    torch::Tensor wire;                // the half-precision copy sent when compressing
    // Gradients that arrived as autograd's own tensors, and the views they go to at launch.
    std::vector<torch::Tensor> arrived, arrived_views;
    int pending = 0;
    std::unique_ptr<CollectiveWork> work;
  };
  struct Location {
    size_t bucket = 0;
    size_t slot = 0;
  };

  void VerifyAcrossRanks();
  void BroadcastFromRankZero(const std::vector<torch::Tensor>& tensors, const std::string& what);
  void BuildBuckets(const std::vector<size_t>& order);
  void RegisterHooks();
  void HookGradientOf(size_t index);
  void CopyArrivals(Bucket& bucket);
  void TakeAverages(Bucket& bucket, std::vector<torch::Tensor>& copy_back, std::vector<torch::Tensor>& averages);
  static void CopyBack(std::vector<torch::Tensor>& copy_back, std::vector<torch::Tensor>& averages);
  void OnGradientReady(size_t index);
  void MarkReady(size_t index);
  void LaunchReadyBuckets();
  void ResetIteration();
  void RebuildFromObservedOrder();

  std::shared_ptr<torch::nn::Module> module_;
  Communicator& communicator_;
  DdpOptions options_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> parameters_;
  // Per parameter, the tensor whose gradient arrives: the parameter, or its low-precision copy.
  std::vector<torch::Tensor> gradient_leaves_;
  std::vector<torch::Tensor> buffers_;
  std::unique_ptr<FlatBuffers> flat_buffers_;  // what buffers_ are views of, when broadcast per step
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  std::mutex mutex_;  // hooks may run on autograd's device threads
  std::vector<Bucket> buckets_;
  std::vector<Location> locations_;
  std::vector<bool> ready_;
  size_t next_to_launch_ = 0;
  bool sync_enabled_ = true;
  bool rebuilt_ = false;
  std::vector<size_t> observed_order_;
};

}  // namespace mgpu
