#include "worker/trainer.h"

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

nlohmann::json SummaryFromConfig(const TrainConfig& config, const WorldInfo& world) {
  return {
      {"model", config.model},
      {"dataset", config.dataset},
      {"mode", config.mode},
      {"backend", "none"},
      {"world_size", world.world_size},
      {"devices", nlohmann::json::array()},
      {"precision", config.precision},
      {"loss_scale_mode", "none"},
      {"batch_size", config.batch_size},
      {"num_workers", config.num_workers},
      {"data_loading", nullptr},
      {"decode", nullptr},
      {"train_samples", nullptr},
      {"test_samples", nullptr},
      {"skipped_images", 0},
      {"epochs", config.epochs},
      {"max_steps", config.max_steps},
      {"lr", config.lr},
      {"optimizer", config.optimizer},
      {"seed", config.seed},
      {"name", config.name},
      {"status", "failed"},
      {"error", ""},
      {"total_seconds", 0.0},
      {"test_accuracy", nullptr},
      {"test_loss", nullptr},
      {"per_class_accuracy", nlohmann::json::array()},
      {"peak_memory_bytes", nlohmann::json::array()},
      {"skipped_steps", 0},
      {"final_loss_scale", 1.0},
      {"param_checksum", nullptr},
      {"epochs_detail", nlohmann::json::array()},
      {"rendezvous_source", world.source},
  };
}

std::optional<StopRequest> Train(const TrainConfig& config, const WorldInfo& world, const torch::Device& device,
                                 Communicator* communicator, RunOutputs& outputs, nlohmann::json& summary) {
  TrainingSession session(config, world, device, communicator, outputs, summary);
  return session.Run();
}

}  // namespace mgpu
