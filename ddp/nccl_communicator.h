// The nccl backend: the raw NCCL API on one GPU per process.
//
// Collectives run on a stream of the communicator's own, made to wait (cudaStreamWaitEvent) for
// the work already queued on the caller's current stream; Wait() makes the caller's current
// stream wait for the collective, so the host never blocks. A watchdog thread polls every
// pending collective's completion event and ncclCommGetAsyncError; on an error or when a
// collective outlives the timeout it aborts the communicator (ncclCommAbort, which releases
// kernels stuck in NCCL), reports the collective, the rank and the host, and ends the process.
// On destruction, collectives still in flight get a few seconds to finish; if they do not (a
// rank failed in the middle of a step), the communicator is aborted rather than destroyed, so
// the process can exit instead of waiting for a peer that will never join. After Abandon() (this
// rank failed) it is aborted at once: ncclCommDestroy synchronizes with the peers, which may wait
// in a collective this rank will never join.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ddp/communicator.h"

namespace mgpu {

// Bytes of an ncclUniqueId; rank 0 creates it and every rank passes the same bytes.
std::string NewNcclUniqueId();

// How a communicator's collectives share the device with the rest of the process.
struct NcclOptions {
  // Caps the thread blocks (SMs) each collective may occupy; 0 leaves it to NCCL. Fewer blocks
  // slow an all-reduce that runs alone but slow the compute it overlaps with less: on 2×H200 fp32
  // DDP backward took 20.2 ms (ResNet-18) and 13.6 ms (VGG-19) with 4 blocks, 20.6 and 14.1 with 8
  // (docs/history/BENCHMARKS-2026-11.md). The NCCL_MAX_CTAS environment variable, when set, wins.
  int max_ctas = 0;
  // The collectives' stream at CUDA's greatest priority, for a process whose step runs at high
  // priority (cuda/step_stream.h): at the default they would start behind the step's kernels.
  // Without that step it gained nothing (2x H200, ResNet-18 synthetic DDP and VGG-19 graphed DDP
  // with the data on the device, two pairs each), so it is off.
  bool high_priority_stream = false;
};

// Throws CollectiveError (host, file:line, NCCL's error text and last error) on failure.
std::unique_ptr<Communicator> MakeNcclCommunicator(const std::string& unique_id, int rank, int size,
                                                   int device_index, std::chrono::milliseconds timeout,
                                                   const NcclOptions& options);

}  // namespace mgpu
