// ReplicaCollectives: collectives among the replicas of one process, driven like the ranks of a
// process group: replica r's part is called on replica r's own thread (ReplicaThreads).
//   Reduce(r, tensors):    replica 0's tensors += every other replica's, in place on replica 0
//   Broadcast(r, tensors): every replica's tensors = replica 0's
// Every replica calls each collective, in the same order, with contiguous tensors on its device
// of the same sizes and dtypes as the other replicas' (its flat buffers, and anything else that
// travels with them). The primary's thread therefore never queues work for the other devices,
// and a replica's part is queued as soon as its own tensors are ready.
//
// Implementations: "nccl" (GPUs, with NCCL: one communicator per device from ncclCommInitAll,
// each driven by its replica's thread, so no call needs a group spanning devices; a part is
// queued on the stream current for the device and the call returns) and "copy" (CPU replicas,
// or GPUs in a build without NCCL: every part waits for the others, then replica 0 adds, or
// each replica copies, and all wait again so no one overwrites a tensor still being read).
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
  virtual void Reduce(size_t replica, const std::vector<torch::Tensor>& tensors) = 0;
  virtual void Broadcast(size_t replica, const std::vector<torch::Tensor>& tensors) = 0;
  // Call when a replica's work failed before its part of a collective: the parts other replicas
  // queued or wait in are released (NCCL: the communicators are aborted; copy: waiting calls throw
  // CollectiveError), and every later call throws CollectiveError. Any thread may call it.
  virtual void Abort() = 0;
};

// "nccl" for two or more CUDA devices when the build has NCCL, else "copy".
std::unique_ptr<ReplicaCollectives> MakeReplicaCollectives(const std::vector<torch::Device>& devices);

#ifdef MGPU_DP_WITH_NCCL
// Throws CollectiveError when NCCL cannot set up the communicators.
std::unique_ptr<ReplicaCollectives> MakeNcclReplicaCollectives(const std::vector<torch::Device>& devices);
#endif

}  // namespace mgpu
