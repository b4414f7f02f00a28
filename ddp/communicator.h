// Collective communication between the ranks of a job: one interface, three implementations.
//   gloo  LibTorch's c10d ProcessGroupGloo over a TCPStore; CPU tensors.
//   mpi   Open MPI's non-blocking collectives; CPU tensors.
//   nccl  the raw NCCL API on the tensor's GPU, on a stream of its own ordered after the caller's
//         current stream with events; a watchdog aborts the communicator on error or timeout.
//
// Collectives are asynchronous: each returns a handle whose Wait() returns once the result may be
// used (on GPUs: by work queued afterwards on the current stream), and whose WaitForHost() returns
// once the host may read it. Every rank must issue the same
// collectives in the same order. No wait blocks forever: past the timeout given at creation a
// collective fails with a CollectiveError naming the collective (`what`), the rank and the host.
//
// CUDA graphs (nccl): a collective issued while the caller's current stream is being captured is
// recorded into the graph, not run; its handle's Wait() joins the capture back. It runs when the
// graph is replayed, which the caller launches through LaunchWatched so the timeout still holds.
//
// nccl: the training thread never blocks inside a CUDA call on work that waits for a peer. A
// graphed DDP rank whose peer had stopped ran at least 24 replays ahead, and its watchdog stopped
// coming back from its CUDA calls, so no thread reported the stuck collective (2x H100,
// 2026-11-27; the training thread spun in CUDA, likely a graph launch into a full device queue
// holding the driver's locks). So LaunchWatched bounds the replays in flight, and WaitForHost
// polls: the rank then ended at the watchdog's timeout in 3 runs of 3 (17.4-18.6 s, against
// 22.9-23.1 s through the watchdog's guard before).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "common/status.h"
#include "ddp/collective_tracker.h"

namespace mgpu {

// Whose failure a failed collective shows: this rank's (it could not start the collective, or
// gave it a wrong tensor), or a peer's: the collective was under way when a peer, or the
// connection to it, went away (reset, closed, a remote NCCL error, no completion within the
// timeout). `mgpu run` blames a rank with a failure of its own before the ranks that saw a peer
// vanish.
enum class CollectiveFault { kThisRank, kPeer };

// A failed or timed-out collective (exit code 1).
class CollectiveError : public Error {
 public:
  explicit CollectiveError(const std::string& message, CollectiveFault fault = CollectiveFault::kThisRank)
      : Error(ExitCode::kFailure, message), fault_(fault) {}
  CollectiveFault fault() const { return fault_; }

 private:
  CollectiveFault fault_;
};

class CollectiveWork {
 public:
  virtual ~CollectiveWork() = default;
  // Throws CollectiveError on failure or timeout.
  virtual void Wait() = 0;
  // Wait(), and returns only once the collective and the caller's work queued before it have
  // completed, so that copying the result to the host does not block. Throws as Wait() does.
  // Backends whose Wait() already waits on the host (gloo, mpi) need no more.
  virtual void WaitForHost() { Wait(); }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sums `tensor` (contiguous) in place over all ranks. `what` names it in errors ("bucket 3").
  virtual std::unique_ptr<CollectiveWork> AllReduceSum(torch::Tensor tensor, const std::string& what) = 0;
  // Replaces `tensor` (contiguous, floating point) by its mean over all ranks, each rank's share
  // divided by size() before the sum (so a half-precision sum cannot overflow where the mean
  // fits). This default divides on the caller's thread, then sums (gloo and mpi have no
  // average); nccl divides inside the collective (ncclAvg).
  virtual std::unique_ptr<CollectiveWork> AllReduceMean(torch::Tensor tensor, const std::string& what);
  // Copies root's `tensor` (contiguous) into every rank's.
  virtual std::unique_ptr<CollectiveWork> Broadcast(torch::Tensor tensor, int root, const std::string& what) = 0;
  // `output` (contiguous, size() × input.numel() elements): rank r's `input` lands in slice r.
  virtual std::unique_ptr<CollectiveWork> AllGather(torch::Tensor output, torch::Tensor input,
                                                    const std::string& what) = 0;
  // Returns once every rank has called it.
  virtual void Barrier(const std::string& what) = 0;

  // Runs `launch`, which queues work on the caller's current stream that holds collectives
  // captured into a CUDA graph (its replay), and holds that work to the collective timeout:
  // unfinished past it, the communicator is aborted with an error naming `what`. nccl first waits
  // (polling, so a failure throws) until only a few earlier launches are unfinished. Backends
  // without device streams cannot capture collectives: they only run `launch`.
  virtual void LaunchWatched(const std::function<void()>& launch, const std::string& what) {
    (void)what;
    launch();
  }

  // Says this rank is leaving after a failure: when the communicator is destroyed it lets go of
  // its peers without waiting for them, as they may sit in a collective this rank will never
  // join (nccl: ncclCommAbort instead of ncclCommDestroy, which is collective and would wait for
  // them until their collective timeout). The backends whose teardown waits for no peer (gloo,
  // mpi) have nothing to do. Call it once no more collectives will be issued.
  virtual void Abandon() {}

  // Device seconds spent inside collectives that have completed so far (waiting for peers
  // included), for backends that run them on a device stream (nccl); nullopt for the others.
  // Compared with the exposed communication time it tells how much of it backward hid.
  // Collectives replayed inside a CUDA graph are not in it (their time is the graph's).
  virtual std::optional<double> CompletedCollectiveSeconds() { return std::nullopt; }

  // The oldest collective this rank has started and not yet seen complete ("all-reduce of
  // bucket 2" and its age), or nullopt: where a stuck rank waits. Thread-safe.
  std::optional<PendingCollective> OldestPendingCollective() const { return tracker_.Oldest(); }

 protected:
  // Implementations Begin() every collective and keep the token until they see it complete.
  CollectiveTracker tracker_;
};

// "<what> on rank R (host H)" prefix for collective errors.
std::string CollectiveContext(const std::string& what, int rank);

}  // namespace mgpu
