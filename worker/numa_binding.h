// --numa-binding applied to this process: its rank's place on the host (the GPU's NUMA node, from
// its PCI address, and the other local ranks' GPUs), the CPUs worker/cpu_topology.h's plan gives
// it, and every thread of the process bound to them. Called once the device is known and before
// the threads that should follow it start (CUDA's context, NCCL's, the loader's): those inherit
// the binding from the thread that creates them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/choices.h"
#include "ddp/world.h"
#include "worker/cpu_topology.h"

namespace mgpu {

// Binds the process as `mode` says for `device` and returns the log's line on it ("" for
// NumaBinding::kNone, which binds nothing). Throws BadInputError where a mode other than none
// meets a CPU device (there is no GPU to be near) or cannot be met (PlanCpuBinding).
std::string ApplyNumaBinding(NumaBinding mode, const torch::Device& device, const WorldInfo& world);

// The rank's place among this host's ranks: its GPU's node, and those of the other local ranks'
// GPUs where this process sees them (every GPU visible, each local rank on its default device),
// else every local rank counted as bound to the same node. `node_of_device` gives a visible CUDA
// device's NUMA node (-1 unknown).
RankPlacement PlaceRank(int device_index, int visible_devices, const WorldInfo& world,
                        const std::function<int(int)>& node_of_device);

// The CPUs this process may run on now (sched_getaffinity: taskset, cgroups' cpusets).
std::vector<int> AllowedCpus();

// Binds every thread of this process to `cpus` (each must be allowed). Throws Error naming the
// thread and errno where one cannot be bound.
void BindEveryThread(const std::vector<int>& cpus);

}  // namespace mgpu
