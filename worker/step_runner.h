// One optimizer step's work, whatever executes it: a step is grad_accum micro-batches, each
// forward and backward, then the gradients' reduction and the optimizer step. The training loop
// (TrainingSession, worker/training_session.cpp) calls, per step,
//
//   for each micro-batch:  loss = runner.MicroBatch(batch, images, micro_in_step, last_micro, step, timeline);
//   then:                  runner.FinishStep(step_nonfinite, timeline);
//
// and knows nothing of how. The variants, one file each:
//   eager_step.cpp          one process, one device: forward and backward on the training thread
//   ddp_step.cpp            eager, with DDP's bucketed all-reduces overlapping backward
//   data_parallel_step.cpp  --mode dp: forward and backward on every replica's thread
//   graphed_step_runner.cpp --cuda-graphs: the whole step one CUDA graph replay (worker/graphed_step.h)
// Each marks its phases on the StepTimeline as it goes (input is the loop's).
#pragma once

#include <memory>

#include <torch/torch.h>

#include "amp/grad_scaler.h"
#include "amp/precision.h"
#include "data/batch_loader.h"
#include "models/classifier.h"
#include "optim/fused_optimizer.h"
#include "worker/step_timeline.h"
#include "worker/test_faults.h"

namespace mgpu {

class DataParallelEngine;
class DistributedDataParallel;
class GraphedTrainStep;

// What every variant steps, and how.
struct StepParts {
  Classifier& model;
  FusedOptimizer& optimizer;
  GradScaler& scaler;
  Precision precision;
  double label_smoothing = 0;
  int64_t grad_accum = 1;   // micro-batches per step; the loss of each is divided by it
  double grad_clip = 0;     // max gradient norm, 0 for none
  const TestFaults& faults;
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;

  // Forward and backward of one micro-batch of step `step` (1-based, the step being taken):
  // `images` (B, C, H, W) in the run's memory layout, or undefined where the batch carries
  // sample indices for a graph to gather; `first_micro` / `last_micro` place it in its step (DDP
  // reduces gradients only after the last). Returns the () float32 loss.
  virtual torch::Tensor MicroBatch(const Batch& batch, const torch::Tensor& images, bool first_micro, bool last_micro,
                                   int64_t step, StepTimeline& timeline) = 0;

  // After the step's last micro-batch: gradients reduced, clipped (--grad-clip), and the optimizer
  // stepped through the loss scaler, which skips the step when `nonfinite` (() bool, or
  // undefined) is true or the gradients are not finite.
  virtual void FinishStep(const torch::Tensor& nonfinite, StepTimeline& timeline) = 0;

  // Whether MicroBatch adds its loss to the epoch's sums itself (the graphed step does, in the graph).
  virtual bool SumsLosses() const { return false; }

 protected:
  // The optimizer step of reduced gradients: clipped (--grad-clip, unscaled first), stepped
  // through the loss scaler (skipped when `nonfinite` or the gradients are not finite), and the
  // scale updated.
  static void StepOptimizer(const StepParts& parts, const torch::Tensor& nonfinite);
};

// The variant for the run: `graphed` when given (DDP's all-reduces, with `replicated`, are in its
// graph), else `data_parallel` when given, else DDP when `replicated` is given, else eager.
std::unique_ptr<StepRunner> MakeStepRunner(const StepParts& parts, GraphedTrainStep* graphed,
                                           DataParallelEngine* data_parallel, DistributedDataParallel* replicated);

// The variants' factories (one per file).
std::unique_ptr<StepRunner> MakeEagerStep(const StepParts& parts);
std::unique_ptr<StepRunner> MakeDdpStep(const StepParts& parts, DistributedDataParallel& replicated);
std::unique_ptr<StepRunner> MakeDataParallelStep(const StepParts& parts, DataParallelEngine& data_parallel);
std::unique_ptr<StepRunner> MakeGraphedStep(GraphedTrainStep& graphed);

// The eager forward and backward of one micro-batch, shared by the eager and DDP variants: the
// policy's forward, the cross-entropy loss (float32 logits, so a float32 loss under every
// policy), the scaled backward of loss / grad_accum.
torch::Tensor EagerForwardBackward(const StepParts& parts, const torch::Tensor& images, const torch::Tensor& labels,
                                   int64_t step, StepTimeline& timeline);

}  // namespace mgpu
