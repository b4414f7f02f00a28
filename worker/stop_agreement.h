// The step boundary at which every rank of a job stops for a signal (common/stop_signal.h).
//
// All ranks must stop at the same step: a rank that goes on waits forever in the next gradient
// all-reduce of one that stopped. The signal may reach every rank (Slurm, torchrun and `mgpu run`
// forward it to all) or one alone (`kill` of one rank's pid), at different moments. So at agreed
// step boundaries each rank puts the signal it received into its own slot of a small vector, and
// one all-reduce (a sum) gives every rank every slot: the ranks stop together as soon as any slot
// is set, and all name the same signal, that of the lowest rank that received one.
//
// Cost: an all-reduce of a few bytes, waited for at once, is a few thread hand-offs (tens of
// microseconds on an idle machine, milliseconds on a crowded CPU; on a GPU, a synchronization).
// So the ranks do not agree at every step but about every kAgreeEvery of training: rank 0 puts
// into the same all-reduce how many steps to go until the next one, from its recent step time,
// and every rank counts down the same number. A signal thus stops the run within about
// kAgreeEvery plus a step. With one process the signal is read at every step (an atomic load).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include <torch/torch.h>

#include "ddp/communicator.h"

namespace mgpu {

struct StopRequest {
  int signal = 0;  // SIGINT, SIGTERM, SIGUSR1 or SIGHUP
  int rank = 0;    // the lowest rank that received it
};

class StopAgreement {
 public:
  static constexpr std::chrono::milliseconds kAgreeEvery{250};
  static constexpr int64_t kMaxStepsBetween = 1000;

  // `communicator`: the job's ranks, or null for one process. `device`: the training device.
  StopAgreement(Communicator* communicator, const torch::Device& device);

  // Every rank calls it after every optimizer step; on the steps the ranks agreed on, it runs the
  // all-reduce. The request the ranks agreed on so far, or nullopt to go on; once it returns a
  // request it keeps returning it.
  std::optional<StopRequest> AtStepBoundary();
  // The same at an epoch's end, always with the all-reduce (an evaluation may have taken long).
  std::optional<StopRequest> AtEpochEnd();

 private:
  using Clock = std::chrono::steady_clock;
  void Agree();
  // Rank 0: steps until the next agreement, from the time per step since the last one.
  int64_t StepsUntilNextAgreement() const;

  Communicator* communicator_;
  torch::Device device_;  // where the all-reduce runs
  int64_t steps_left_ = 1;
  int64_t steps_since_ = 0;
  Clock::time_point agreed_at_ = Clock::now();
  std::optional<StopRequest> agreed_;
};

}  // namespace mgpu
