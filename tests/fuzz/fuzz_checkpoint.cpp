// Checkpoint files (`--resume`): RestoreCheckpoint in worker/checkpoint.h, the top-level read,
// into a small LeNet with SGD (the corpus' checkpoints are of this run). An input that starts as
// a checkpoint file does (a zip archive, or format 1's MGPUCKPT) is read as it is, which exercises
// the framing (worker/checkpoint_file.h); any other input is split at its first NUL into a header
// and a torch archive of the state, and framed with a valid checksum first, so that mutations
// reach the header's JSON, the identity and position checks and the tensors' checks.
#include <cstring>

#include "amp/grad_scaler.h"
#include "models/model_factory.h"
#include "optim/fused_optimizer.h"
#include "optim/lr_scheduler.h"
#include "tests/fuzz/fuzz_input.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_file.h"
#include "worker/torch_archive.h"

namespace {

struct Run {
  Run() : model(mgpu::MakeModel("lenet", mgpu::ModelShape{1, 2, 16, 16})) {
    mgpu::OptimizerOptions sgd;
    sgd.kind = "sgd";
    optimizer = std::make_unique<mgpu::FusedOptimizer>(model->parameters(), sgd);
    scaler = std::make_unique<mgpu::GradScaler>(mgpu::ParseLossScaling("dynamic"), torch::kCPU);
    scheduler = std::make_unique<mgpu::LrScheduler>(mgpu::SchedulerOptions{});
    mgpu::TrainConfig config;
    config.model = "lenet";
    config.optimizer = "sgd";
    identity = mgpu::CheckpointIdentity::Of(config, 1, *model);
  }
  std::shared_ptr<mgpu::Classifier> model;
  std::unique_ptr<mgpu::FusedOptimizer> optimizer;
  std::unique_ptr<mgpu::GradScaler> scaler;
  std::unique_ptr<mgpu::LrScheduler> scheduler;
  mgpu::CheckpointIdentity identity;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run run;
  const std::string input(reinterpret_cast<const char*>(data), size);
  mgpu::fuzz::ExpectParsedOrRefused([&] {
    std::string file = input;
    if (input.rfind("MGPUCKPT", 0) != 0 && input.rfind("PK\x03\x04", 0) != 0) {
      const size_t split = std::min(input.find('\0'), input.size());
      const c10::IValue state =
          mgpu::ReadTorchArchive(input.substr(std::min(split + 1, input.size())), "the input's state");
      if (!state.isGenericDict()) return;
      file = mgpu::EncodeCheckpointFile(input.substr(0, split), state.toGenericDict());
    }
    const std::string path =
        mgpu::fuzz::WriteInputFile(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "latest.ckpt");
    mgpu::TrainingParts parts{*run.model, *run.optimizer, *run.scaler, *run.scheduler, torch::kCPU};
    mgpu::RestoreCheckpoint(path, run.identity, parts);
  });
  return 0;
}
