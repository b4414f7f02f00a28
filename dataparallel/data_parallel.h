// Single-process data parallelism (--mode dp): DataParallel's contract — one process, one
// optimizer, the model the optimizer steps on the primary device — with each step's batch split
// over several devices.
//
// A step, as the trainer drives it:
//
//   optimizer.ZeroGrad();                                        // the primary's gradients
//   loss = dp.ForwardBackward(images, labels, scaler, 1.0);      // all devices, summed on the primary
//   scaler.Step(optimizer); scaler.Update();                     // on the primary only
//   dp.SyncReplicas();                                           // primary → replicas
//
// The gradients left on the primary are those of the global batch's mean loss (times the loss
// scale and `loss_weight`), whatever the split, uneven last batches included: replica r's slice
// contributes its summed loss / B, so every image's gradient is scaled by 1/B as in one
// process. A run equals one device with the global batch up to the order of summation.
//
// Implementations (--dp-impl):
//   mgpu      replicas built once and kept; one persistent thread per device; gradients
//             reduced onto the primary (NCCL on GPUs, additions on CPUs); parameters and
//             buffers broadcast back. See replicated_data_parallel.h.
//   libtorch  LibTorch's stock torch::nn::parallel::data_parallel every step (clone, scatter,
//             parallel_apply, gather), for comparison; CUDA devices only. See
//             libtorch_data_parallel.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "amp/grad_scaler.h"
#include "amp/precision.h"
#include "models/classifier.h"
#include "report/run_summary.h"

namespace mgpu {

class DataParallelEngine {
 public:
  virtual ~DataParallelEngine() = default;

  // images (B, C, H, W), labels (B), on any device; pinned CPU memory is best, as every replica
  // then copies its own slice. Adds to the primary model's gradients those of
  // scaler.Scale(mean loss over the B images × loss_weight), and returns that mean loss,
  // unscaled and unweighted: () float32 on the primary device.
  virtual torch::Tensor ForwardBackward(const torch::Tensor& images, const torch::Tensor& labels,
                                        const GradScaler& scaler, double loss_weight) = 0;

  // Copies the primary's parameters and buffers to the replicas. Call after the optimizer step;
  // ForwardBackward also does it first when the primary may have changed since the last call,
  // so replicas never run stale weights (e.g. after a checkpoint was loaded into the primary).
  virtual void SyncReplicas() = 0;

  // Adds to summary.json: dp_impl, dp_comm, devices, peak_memory_bytes (one per device) and
  // dp_timing (seconds summed over the run: per-device forward and backward; reduce, step and
  // broadcast on the primary), and with --cuda-graphs cuda_graphs (captured, replays,
  // eager_steps; a replay's time counts as backward). Waits for the devices.
  virtual void Report(RunSummary& summary) = 0;

  // One line for the start-up table.
  virtual std::string Describe() const = 0;
};

struct DataParallelOptions {
  std::string impl = "mgpu";  // mgpu | libtorch
  std::vector<torch::Device> devices;  // devices[0]: the primary, where the model already is
  Precision precision = Precision::kFp32;
  // Builds a fresh model of the primary's architecture and shape (on the CPU, float32), from
  // which replicas are made; its initial values do not matter.
  std::function<std::shared_ptr<Classifier>()> make_model;
  double label_smoothing = 0;  // of the training loss, as --label-smoothing
  // --cuda-graphs (impl mgpu, CUDA devices): each replica's forward and backward on its slice is
  // captured as a CUDA graph and replayed; reduce, optimizer step and broadcast stay eager.
  bool cuda_graphs = false;
};

// Throws BadInputError for an unknown impl or devices it cannot use.
std::unique_ptr<DataParallelEngine> MakeDataParallel(std::shared_ptr<Classifier> primary,
                                                     DataParallelOptions options);

// The forward pass of the precision policy (as the single-device trainer runs it): inputs in
// the model's dtype, autocast for the amp-* policies on the calling thread, logits in float32.
// images (B, C, H, W) → logits (B, classes). `autocast_cache` false: autocast recasts the
// weights at every use instead of caching the casts, as CUDA graph capture requires.
torch::Tensor PolicyForward(Classifier& model, const torch::Tensor& images, Precision precision,
                            bool autocast_cache = true);

}  // namespace mgpu
