#include "worker/trainer.h"

#include <c10/core/DeviceGuard.h>
#include <fmt/format.h>

#include "common/status.h"
#include "worker/training_session.h"

namespace mgpu {

torch::Device ResolveDevice(const std::string& requested, const WorldInfo& world) {
  if (requested == "cpu") return torch::kCPU;
  const bool have_cuda = torch::cuda::is_available();
  if (requested == "auto" && !have_cuda) return torch::kCPU;
  if (!have_cuda) {
    throw BadInputError(fmt::format("--device {}: no CUDA device is visible to this process "
                                    "(check CUDA_VISIBLE_DEVICES and the driver), or use --device cpu",
                                    requested));
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  const int index = requested.rfind("cuda:", 0) == 0 ? std::stoi(requested.substr(5)) : DefaultCudaIndex(world, count);
  if (index >= count) {
    throw BadInputError(fmt::format("--device {} on local rank {}: only {} CUDA device(s) are visible "
                                    "(cuda:0 to cuda:{})",
                                    requested, world.local_rank, count, count - 1));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::optional<StopRequest> Train(const TrainConfig& config, const WorldInfo& world, const torch::Device& device,
                                 Communicator* communicator, RunOutputs& outputs, RunSummary& summary) {
  // The run's device is this thread's current one, as torch.cuda.set_device(local_rank) makes it in
  // a PyTorch job: what uses "the current device" (a library's handles, a tensor made on kCUDA)
  // then lands on it rather than on device 0.
  const c10::DeviceGuard on_device(device);
  TrainingSession session(config, world, device, communicator, outputs, summary);
  return session.Run();
}

}  // namespace mgpu
