// One process, one device: forward and backward on the training thread, then the scaler's step.
#include "dataparallel/data_parallel.h"
#include "worker/step_runner.h"

namespace mgpu {

torch::Tensor EagerForwardBackward(const StepParts& parts, const torch::Tensor& images, const torch::Tensor& labels,
                                   int64_t step, StepTimeline& timeline) {
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      PolicyForward(parts.model, images, parts.precision), labels,
      torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(parts.label_smoothing));  // ()
  loss = parts.faults.PoisonLoss(step, loss);
  timeline.Mark(StepPhase::kForward);
  parts.scaler.Scale(parts.grad_accum > 1 ? loss / static_cast<double>(parts.grad_accum) : loss).backward();
  timeline.Mark(StepPhase::kBackward);
  return loss;
}

namespace {

class EagerStep : public StepRunner {
 public:
  explicit EagerStep(const StepParts& parts) : parts_(parts) {}

  torch::Tensor MicroBatch(const Batch& batch, const torch::Tensor& images, bool first_micro, bool /*last_micro*/,
                           int64_t step, StepTimeline& timeline) override {
    if (first_micro) parts_.optimizer.ZeroGrad();
    return EagerForwardBackward(parts_, images, batch.labels, step, timeline);
  }

  void FinishStep(const torch::Tensor& nonfinite, StepTimeline& timeline) override {
    StepOptimizer(parts_, nonfinite);
    timeline.Mark(StepPhase::kOptimizer);
  }

 private:
  StepParts parts_;
};

}  // namespace

std::unique_ptr<StepRunner> MakeEagerStep(const StepParts& parts) { return std::make_unique<EagerStep>(parts); }

}  // namespace mgpu
