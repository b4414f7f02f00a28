// Faults the tests inject into a training run, read from the environment variable
// MGPU_TEST_FAULTS and never from the user's options, so they show in no --help, start-up table
// or config.yaml. The value is a comma-separated list of KEY=N:
//   hang-at-step=N       the training thread hangs after optimizer step N (heartbeats go on), to
//                        test `mgpu run`'s hang detection
//   fail-at-step=N       step N fails with an error after its backward, while DDP's all-reduces
//                        may still be in flight
//   nonfinite-at-step=N  step N's loss becomes NaN before backward, to test --on-nonfinite
//                        (--mode single without --cuda-graphs)
//   hang-rank=K, fail-rank=K   only rank K hangs or fails (default: every rank)
//   rank=K               both of them
// e.g. MGPU_TEST_FAULTS="fail-at-step=3,rank=1". Unset or empty: no faults.
#pragma once

#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "worker/train_config.h"

namespace mgpu {

inline constexpr char kTestFaultsVariable[] = "MGPU_TEST_FAULTS";

// The one hook the training loop calls at its three fault points. Step numbers count optimizer
// steps from 1; 0 means "never".
class TestFaults {
 public:
  // Parses MGPU_TEST_FAULTS' value. Throws BadInputError naming the variable and the bad entry.
  static TestFaults Parse(const std::string& text);
  // This process's faults (parsed once; BadInputError as Parse on first use).
  static const TestFaults& FromEnvironment();

  // Throws BadInputError where a fault cannot be injected into the run `config` describes.
  void CheckApplies(const TrainConfig& config) const;

  // Before backward of the step numbered `step`: its loss, made NaN where asked.
  torch::Tensor PoisonLoss(int64_t step, const torch::Tensor& loss) const;
  // After backward of step `step`: throws Error(kFailure) where asked for this rank.
  void AfterBackward(int64_t step, int rank) const;
  // After step `step` finished: hangs for good where asked for this rank.
  void AfterStep(spdlog::logger& log, int64_t step, int rank) const;

 private:
  int64_t hang_at_step_ = 0;
  int64_t hang_rank_ = -1;
  int64_t fail_at_step_ = 0;
  int64_t fail_rank_ = -1;
  int64_t nonfinite_at_step_ = 0;
};

}  // namespace mgpu
