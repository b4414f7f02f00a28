// --cuda-graphs: forward, backward, DDP's all-reduces (when replicated) and the optimizer step in
// one graph replay (worker/graphed_step.h), after its eager warm-up steps; its time counts as
// backward. The graph sums the loss into the epoch's sums itself and skips a non-finite step.
#include "ddp/distributed_data_parallel.h"
#include "worker/graphed_step.h"
#include "worker/step_runner.h"

namespace mgpu {
namespace {

class GraphedStep : public StepRunner {
 public:
  GraphedStep(const StepParts& parts, GraphedTrainStep& graphed, DistributedDataParallel* replicated)
      : parts_(parts), graphed_(graphed), replicated_(replicated) {}

  torch::Tensor MicroBatch(const Batch& batch, const torch::Tensor& images, bool /*first_micro*/, bool last_micro,
                           int64_t /*step*/, StepTimeline& timeline) override {
    std::optional<DistributedDataParallel::NoSync> accumulate_locally;
    if (replicated_ != nullptr && !last_micro) accumulate_locally.emplace(*replicated_);
    torch::Tensor loss = batch.sample_indices.defined() ? graphed_.StepOnSamples(batch.sample_indices)
                                                        : graphed_.Step(images, batch.labels);
    timeline.Mark(StepPhase::kBackward);
    return loss;
  }

  void FinishStep(const torch::Tensor& /*nonfinite*/, StepTimeline& timeline) override {
    ClipGradients(parts_);  // the graph stepped already
    timeline.Mark(StepPhase::kOptimizer);
  }

  bool SumsLosses() const override { return true; }

 private:
  StepParts parts_;
  GraphedTrainStep& graphed_;
  DistributedDataParallel* replicated_;
};

}  // namespace

std::unique_ptr<StepRunner> MakeGraphedStep(const StepParts& parts, GraphedTrainStep& graphed,
                                            DistributedDataParallel* replicated) {
  return std::make_unique<GraphedStep>(parts, graphed, replicated);
}

}  // namespace mgpu
