#include "worker/train_config.h"

#include <cmath>

namespace mgpu {

DatasetOptions DatasetOptionsFrom(const TrainConfig& config) {
  DatasetOptions options;
  options.image_size = config.image_size;
  options.on_bad_image = config.on_bad_image;
  options.synthetic_train = config.synthetic_train;
  options.synthetic_test = config.synthetic_test;
  options.synthetic_channels = config.synthetic_channels;
  options.seed = config.seed;
  options.data_loading = config.data_loading;
  return options;
}

DdpOptions DdpOptionsFrom(const TrainConfig& config) {
  DdpOptions options;
  options.bucket_cap_bytes = static_cast<int64_t>(config.bucket_cap_mb * (1 << 20));
  options.last_bucket_cap_bytes = static_cast<int64_t>(config.last_bucket_cap_mb * (1 << 20));
  options.gradient_as_bucket_view = config.gradient_as_bucket_view;
  options.find_unused_parameters = config.find_unused_parameters;
  options.broadcast_buffers = config.broadcast_buffers;
  options.compression = config.ddp_compression;
  return options;
}

SchedulerOptions SchedulerOptionsFrom(const TrainConfig& config, int64_t steps_per_epoch) {
  SchedulerOptions options;
  options.kind = config.scheduler;
  options.base_lr = EffectiveLr(config);
  options.milestones = config.milestones;
  options.gamma = config.gamma;
  options.warmup_steps = std::llround(config.warmup_epochs * static_cast<double>(steps_per_epoch));
  options.min_lr = config.min_lr;
  options.total_steps = config.epochs * steps_per_epoch;
  options.plateau_factor = config.plateau_factor;
  options.plateau_patience = config.plateau_patience;
  return options;
}

}  // namespace mgpu
