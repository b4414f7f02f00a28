// --cuda-graphs: forward, backward, DDP's all-reduces (when replicated) and the optimizer step in
// one graph replay (worker/graphed_step.h), after its eager warm-up steps; its time counts as
// backward. The graph sums the loss into the epoch's sums itself and skips a non-finite step.
// ValidateConfig refuses --grad-accum and --grad-clip with a whole-step graph, so every
// micro-batch is a whole step and there is nothing left to do after it.
#include "worker/graphed_step.h"
#include "worker/step_runner.h"

namespace mgpu {
namespace {

class GraphedStep : public StepRunner {
 public:
  explicit GraphedStep(GraphedTrainStep& graphed) : graphed_(graphed) {}

  torch::Tensor MicroBatch(const Batch& batch, const torch::Tensor& images, bool /*first_micro*/,
                           bool /*last_micro*/, int64_t /*step*/, StepTimeline& timeline) override {
    torch::Tensor loss = batch.sample_indices.defined() ? graphed_.StepOnSamples(batch.sample_indices)
                                                        : graphed_.Step(images, batch.labels);
    timeline.Mark(StepPhase::kBackward);
    return loss;
  }

  void FinishStep(const torch::Tensor& /*nonfinite*/, StepTimeline& timeline) override {
    timeline.Mark(StepPhase::kOptimizer);  // the graph stepped already
  }

  bool SumsLosses() const override { return true; }

 private:
  GraphedTrainStep& graphed_;
};

}  // namespace

std::unique_ptr<StepRunner> MakeGraphedStep(GraphedTrainStep& graphed) { return std::make_unique<GraphedStep>(graphed); }

}  // namespace mgpu
