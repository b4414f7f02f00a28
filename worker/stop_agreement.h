// The step boundary at which every rank of a job stops for a signal (worker/stop_signal.h).
//
// All ranks must stop at the same step: a rank that goes on waits forever in the next gradient
// all-reduce of one that stopped. The signal may reach every rank (Slurm, torchrun and `mgpu run`
// forward it to all) or one alone (`kill` of one rank's pid), at different moments. So at every
// step boundary each rank puts the signal it received into its own slot of a world-size vector,
// and one small all-reduce (a sum) gives every rank every slot: the ranks stop together as soon as
// any slot is set, and all name the same signal, that of the lowest rank that received one.
//
// Cost: on CPU backends (gloo, mpi) one all-reduce of a few bytes per step, waited for at once;
// on the device (nccl) the all-reduce and a copy to pinned host memory are queued per step and
// read one step later, so the host never waits for the step it has just queued (the ranks then
// stop one step after the signal's step, all at the same one). With one process the signal is
// read directly.
#pragma once

#include <optional>
#include <vector>

#include <c10/core/Event.h>
#include <torch/torch.h>

#include "ddp/communicator.h"

namespace mgpu {

struct StopRequest {
  int signal = 0;  // SIGINT, SIGTERM or SIGUSR1
  int rank = 0;    // the lowest rank that received it
};

class StopAgreement {
 public:
  // `communicator`: the job's ranks, or null for one process. `device`: the training device.
  StopAgreement(Communicator* communicator, const torch::Device& device);

  // Every rank calls it at the same points (it issues a collective on each call): the request the
  // ranks agreed on so far, or nullopt to go on. Once it returns a request it keeps returning it.
  std::optional<StopRequest> AtStepBoundary();

 private:
  // Slot r: rank r's signal. Sets agreed_ from the first slot that is set.
  void Decide(const torch::Tensor& slots);

  struct InFlight {
    torch::Tensor host;  // (world) int32, pinned
    c10::Event copied;
  };

  Communicator* communicator_;
  torch::Device device_;    // where the all-reduce runs
  bool lagged_;             // a device backend: read one call later
  std::vector<InFlight> in_flight_;
  std::optional<StopRequest> agreed_;
};

}  // namespace mgpu
