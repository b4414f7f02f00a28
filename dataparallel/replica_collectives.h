// ReplicaCollectives: moves flat buffers between the replicas of one process.
//   ReduceToPrimary:      buffers[0][g] += buffers[r][g] for every replica r >= 1
//   BroadcastFromPrimary: buffers[r][g] = buffers[0][g] for every replica r >= 1
// buffers[r] are replica r's contiguous tensors (its FlatBuffers::groups(), and anything else
// that travels with them), on its device, in the same order and of the same sizes and dtypes on
// every replica. Both are queued, from one thread, on the streams current for the devices on
// that thread, and do not wait for them. Call them once every replica's work is queued: a
// device's NCCL part queued while another thread still launches and allocates on another device
// can leave NCCL's kernel waiting on a thread that waits on the driver.
//
// Implementations: "nccl" (GPUs, with NCCL: one communicator per device from ncclCommInitAll,
// every group of a call inside one ncclGroupStart/End) and "copy" (CPU replicas, or GPUs in a
// build without NCCL: additions and device-to-device copies, in replica order).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

class ReplicaCollectives {
 public:
  virtual ~ReplicaCollectives() = default;
  virtual std::string name() const = 0;
  virtual void ReduceToPrimary(const std::vector<std::vector<torch::Tensor>>& buffers) = 0;
  virtual void BroadcastFromPrimary(const std::vector<std::vector<torch::Tensor>>& buffers) = 0;
};

// "nccl" for two or more CUDA devices when the build has NCCL, else "copy".
std::unique_ptr<ReplicaCollectives> MakeReplicaCollectives(const std::vector<torch::Device>& devices);

#ifdef MGPU_DP_WITH_NCCL
// Throws CollectiveError when NCCL cannot set up the communicators.
std::unique_ptr<ReplicaCollectives> MakeNcclReplicaCollectives(const std::vector<torch::Device>& devices);
#endif

}  // namespace mgpu
