// --dp-devices: the devices a single-process DataParallel run (--mode dp) replicates the model
// onto. The first one is the primary: it holds the model the optimizer steps, the master
// weights, the gradient sums and evaluation.
//
//   auto         every visible CUDA device, the one --device names first (cuda:0 by default);
//                with --device cpu, or --device auto and no CUDA device, two CPU replicas
//   cuda:0,cuda:1  (or 0,1) those CUDA devices, each at most once
//   cpu,cpu      CPU replicas (any count >= 1), for tests and CPU-only machines
//
// CPU and CUDA entries cannot be mixed. Every violation is a BadInputError naming the entry.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

// `device_flag` is --device (auto | cpu | cuda | cuda:K); it matters only for `auto`.
// `visible_cuda_devices` is torch::cuda::device_count() (a parameter, so tests can vary it).
std::vector<torch::Device> ResolveDataParallelDevices(const std::string& list, const std::string& device_flag,
                                                      int visible_cuda_devices);

// "cpu" or "cuda:K".
std::string DeviceLabel(const torch::Device& device);

}  // namespace mgpu
