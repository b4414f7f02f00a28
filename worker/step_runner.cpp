#include "worker/step_runner.h"

namespace mgpu {

void StepRunner::StepOptimizer(const StepParts& parts, const torch::Tensor& nonfinite) {
  if (parts.grad_clip > 0) {
    parts.scaler.Unscale(parts.optimizer);
    parts.optimizer.ClipGradNorm(parts.grad_clip);
  }
  parts.scaler.Step(parts.optimizer, nonfinite);
  parts.scaler.Update();
}

std::unique_ptr<StepRunner> MakeStepRunner(const StepParts& parts, GraphedTrainStep* graphed,
                                           DataParallelEngine* data_parallel, DistributedDataParallel* replicated) {
  if (graphed != nullptr) return MakeGraphedStep(*graphed);
  if (data_parallel != nullptr) return MakeDataParallelStep(parts, *data_parallel);
  if (replicated != nullptr) return MakeDdpStep(parts, *replicated);
  return MakeEagerStep(parts);
}

}  // namespace mgpu
