// Training checkpoints: everything a run needs to continue exactly where it stood.
//
// A checkpoint (file layout: worker/checkpoint_file.h; Python reads it with torch.load(path,
// weights_only=True)) holds the model's parameters and buffers, the optimizer's state (moments,
// momentum buffers, step counts, o2 master weights), the schedule's state, the loss scaler's scale, growth tracker and skipped-step count, the
// default CPU generator's state (and the CUDA one when training on a GPU), and the position:
// epoch, optimizer step, micro-batches done in the epoch and the epoch's running loss. Its
// header records the identity of the run (CheckpointIdentity); resuming with a run that differs
// in any of those fields is bad input naming the field.
//
// With a fixed seed on the CPU a resumed run ends bit-identical to an uninterrupted one: batch
// order depends only on (seed, epoch), augmentation on (seed, epoch, index), so the resumed
// run rebuilds the epoch's index list and skips the micro-batches already done.
//
// Only rank 0 writes (every DDP rank holds the same state); every rank reads the same file to
// resume, so the run folder must be visible to all ranks (one host, or a shared file system).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "amp/grad_scaler.h"
#include "optim/fused_optimizer.h"
#include "optim/lr_scheduler.h"
#include "report/run_summary.h"
#include "worker/train_config.h"

namespace mgpu {

// What must be the same for a checkpoint to continue a run.
struct CheckpointIdentity {
  std::string model, dataset, optimizer, precision, scheduler;
  int64_t batch_size = 0, world_size = 0, grad_accum = 0;
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes;  // by name

  static CheckpointIdentity Of(const TrainConfig& config, int world_size, torch::nn::Module& model);
};

// Where the run stands; what the trainer's loop needs besides the tensors it owns.
struct TrainingPosition {
  int64_t epoch = 0;          // the epoch in progress, or the next one after an epoch's end
  int64_t step = 0;           // optimizer steps taken in the whole run
  int64_t epoch_steps = 0;    // of which in `epoch`
  int64_t micro_batches = 0;  // micro-batches of `epoch` done (by this rank)
  int64_t images_seen = 0;    // images of `epoch` done (by this rank)
  // The epoch's running training loss: () double sums of loss × images and of images.
  torch::Tensor loss_sum, loss_images;
  std::vector<EpochRecord> epochs_detail;  // summary.json's, of finished epochs
};

// The state a checkpoint saves and restores, owned by the trainer.
struct TrainingParts {
  torch::nn::Module& model;
  FusedOptimizer& optimizer;
  GradScaler& scaler;
  LrScheduler& scheduler;
  torch::Device device;
};

// The checkpoint file's bytes. Synchronizes with the device.
std::string SerializeCheckpoint(const CheckpointIdentity& identity, TrainingParts& parts,
                                const TrainingPosition& position);

// `--resume PATH`: a checkpoint file, or a run folder meaning PATH/checkpoints/latest.ckpt.
// Throws BadInputError when neither exists.
std::string ResolveResumePath(const std::string& given);

// Reads `path`, checks it against `expected`, loads the tensors into `parts` and returns the
// position (loss sums on parts.device). Throws BadInputError naming the path and what is wrong:
// unreadable, truncated, corrupt, or a mismatching identity field. A file whose checksum holds
// may still have been rewritten, so before anything is loaded every header field is checked
// against its range (the position's counts >= 0 and consistent, the schedule's lr finite), and
// every tensor against the run's (names as load_state_dict(strict=True) compares them, shapes,
// dtypes, finite values); the error names the field or tensor.
TrainingPosition RestoreCheckpoint(const std::string& path, const CheckpointIdentity& expected, TrainingParts& parts);

// One epoch of the run as one rank takes it.
struct EpochShape {
  int64_t images = 0;         // this rank's shard of the training set
  int64_t micro_batches = 0;  // of this rank
  int64_t steps = 0;          // optimizer steps
};

// Throws BadInputError naming `path` and the field when a restored `position` lies outside an
// epoch of this shape (more steps, micro-batches or images done than the epoch has).
void CheckPositionFits(const TrainingPosition& position, const EpochShape& epoch, const std::string& path);

// When and where checkpoints go: <folder>/step-<N>.ckpt, then latest.ckpt pointing at the same
// bytes, each replaced atomically.
class CheckpointWriter {
 public:
  // every: optimizer steps between checkpoints, 0 for none. `writes`: whether this rank writes.
  CheckpointWriter(std::string folder, int64_t every, bool writes);

  bool enabled() const { return every_ > 0; }
  bool DueAfterStep(int64_t step) const { return enabled() && step % every_ == 0; }
  // Writes the checkpoint of `step` (serialize() is called on the writing rank only). Returns
  // the path written, empty on other ranks. Throws mgpu::Error if the folder is not writable.
  std::string Write(int64_t step, const std::function<std::string()>& serialize);

 private:
  std::string folder_;
  int64_t every_;
  bool writes_;
};

}  // namespace mgpu
