// How many hardware work queues the CUDA driver opens from this process to a device:
// CUDA_DEVICE_MAX_CONNECTIONS, read when the process creates its CUDA context (8 by default).
// Streams beyond that many share queues, and a kernel then waits behind whatever was enqueued
// before it on its queue, from whichever stream.
//
// `--decode gpu` runs more streams than that: the training's, NCCL's, the decode's side and
// decode streams, nvJPEG's own and LibTorch's pool. Its producer thread waits, image by image,
// for a conversion kernel that nvJPEG launches on a stream of its own, so that kernel's queue
// sets the decode's pace. Measured on 2x H100 (ResNet-18 at 224, 4 threads per GPU, three calls,
// bench/results/2026-11-28-2xH100-cuda-work-queues/): with 8 queues DDP's GPUs waited 6-14% of
// each step for their batch and trained 20,641-23,788 img/s; with 32 they waited 1-4% and
// trained 24,241-27,977, more in every pair. One GPU: -2% to +7%. Training alone gained nothing
// (ResNet-18 synthetic, VGG-19 graphed DDP), so only a run that may decode on the GPU asks for
// more queues. Under MPS the clients share the server's queues, so more per client leaves room for
// fewer clients; a value the environment sets is kept.
#pragma once

#include <optional>
#include <string>

#include "ddp/environment.h"

namespace mgpu {

inline constexpr int kGpuDecodeWorkQueues = 32;  // the driver's maximum

struct WorkQueuesChoice {
  std::optional<int> set_to;  // the value this process exports; nullopt: the environment's (or the driver's default)
  std::string note;           // for the log; empty when nothing concerns the run
};

// `may_decode_on_gpu`: --decode gpu or auto on a device that is not the CPU. A value the
// environment already holds is kept (the user's choice), and named in the note.
WorkQueuesChoice ChooseWorkQueues(bool may_decode_on_gpu, const EnvLookup& env);

// Exports the choice's value. Must run before the process's first CUDA call: the driver reads the
// variable once, when it creates the context.
void ApplyWorkQueues(const WorkQueuesChoice& choice);

}  // namespace mgpu
