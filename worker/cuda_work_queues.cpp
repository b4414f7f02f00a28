#include "worker/cuda_work_queues.h"

#include <cstdlib>

#include <fmt/format.h>

namespace mgpu {
namespace {
constexpr const char* kVariable = "CUDA_DEVICE_MAX_CONNECTIONS";
}  // namespace

WorkQueuesChoice ChooseWorkQueues(bool may_decode_on_gpu, const EnvLookup& env) {
  WorkQueuesChoice choice;
  if (!may_decode_on_gpu) return choice;
  if (EnvIsSet(env, kVariable)) {
    choice.note = fmt::format("CUDA work queues: {}={} from the environment (decoding on the GPU runs best with {})",
                              kVariable, env(kVariable), kGpuDecodeWorkQueues);
    return choice;
  }
  choice.set_to = kGpuDecodeWorkQueues;
  choice.note = fmt::format("CUDA work queues: {} ({} set because JPEGs may be decoded on the GPU, whose kernels "
                            "would otherwise queue behind the training's; set the variable to override)",
                            kGpuDecodeWorkQueues, kVariable);
  return choice;
}

void ApplyWorkQueues(const WorkQueuesChoice& choice) {
  if (choice.set_to) ::setenv(kVariable, std::to_string(*choice.set_to).c_str(), /*overwrite=*/1);
}

}  // namespace mgpu
