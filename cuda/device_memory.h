// Peak memory of one device for summary.json's peak_memory_bytes: the CUDA caching allocator's
// peak of allocated bytes on a GPU, the process's peak RSS on the CPU (so CPU replicas of one
// process all report the same number).
#pragma once

#include <torch/torch.h>

namespace mgpu {

long long DevicePeakMemoryBytes(const torch::Device& device);

}  // namespace mgpu
