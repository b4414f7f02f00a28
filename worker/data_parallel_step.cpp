// --mode dp: forward and backward run on every replica's thread (dp_timing has them per device),
// the gradients summed on the primary; after the step the primary's weights go to the replicas.
#include "dataparallel/data_parallel.h"
#include "worker/step_runner.h"

namespace mgpu {
namespace {

class DataParallelStep : public StepRunner {
 public:
  DataParallelStep(const StepParts& parts, DataParallelEngine& data_parallel)
      : parts_(parts), data_parallel_(data_parallel) {}

  torch::Tensor MicroBatch(const Batch& batch, const torch::Tensor& images, bool first_micro, bool /*last_micro*/,
                           int64_t /*step*/, StepTimeline& timeline) override {
    if (first_micro) parts_.optimizer.ZeroGrad();
    torch::Tensor loss = data_parallel_.ForwardBackward(images, batch.labels, parts_.scaler,
                                                        1.0 / static_cast<double>(parts_.grad_accum));
    timeline.Mark(StepPhase::kBackward);
    return loss;
  }

  void FinishStep(const torch::Tensor& nonfinite, StepTimeline& timeline) override {
    StepOptimizer(parts_, nonfinite);
    data_parallel_.SyncReplicas();
    timeline.Mark(StepPhase::kOptimizer);  // the broadcast to the replicas included
  }

 private:
  StepParts parts_;
  DataParallelEngine& data_parallel_;
};

}  // namespace

std::unique_ptr<StepRunner> MakeDataParallelStep(const StepParts& parts, DataParallelEngine& data_parallel) {
  return std::make_unique<DataParallelStep>(parts, data_parallel);
}

}  // namespace mgpu
