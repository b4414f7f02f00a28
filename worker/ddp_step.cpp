// DDP, eager: every rank's backward feeds DDP's buckets, whose all-reduces overlap it; only the
// step's last micro-batch reduces (the others accumulate locally under NoSync). DDP has averaged
// the gradients before the scaler looks at them, so every rank skips the same steps; a rank's own
// non-finite loss also poisons the average.
#include "ddp/distributed_data_parallel.h"
#include "worker/step_runner.h"

namespace mgpu {
namespace {

class DdpStep : public StepRunner {
 public:
  DdpStep(const StepParts& parts, DistributedDataParallel& replicated) : parts_(parts), replicated_(replicated) {}

  torch::Tensor MicroBatch(const Batch& batch, const torch::Tensor& images, bool first_micro, bool last_micro,
                           int64_t step, StepTimeline& timeline) override {
    if (first_micro) replicated_.ZeroGrad();
    replicated_.PrepareForward();
    std::optional<DistributedDataParallel::NoSync> accumulate_locally;
    if (!last_micro) accumulate_locally.emplace(replicated_);
    return EagerForwardBackward(parts_, images, batch.labels, step, timeline);
  }

  void FinishStep(const torch::Tensor& nonfinite, StepTimeline& timeline) override {
    replicated_.FinishBackward();
    timeline.Mark(StepPhase::kExposedComm);
    StepOptimizer(parts_, nonfinite);
    timeline.Mark(StepPhase::kOptimizer);
  }

 private:
  StepParts parts_;
  DistributedDataParallel& replicated_;
};

}  // namespace

std::unique_ptr<StepRunner> MakeDdpStep(const StepParts& parts, DistributedDataParallel& replicated) {
  return std::make_unique<DdpStep>(parts, replicated);
}

}  // namespace mgpu
