// The worker's side of the configuration: the options of the data, DDP and schedule libraries,
// built from a TrainConfig. The configuration itself, its option table, parsing and checks are
// torch-free, in config/train_config.h (included here).
#pragma once

#include <cstdint>

#include "config/train_config.h"
#include "data/augment.h"
#include "data/datasets.h"
#include "ddp/distributed_data_parallel.h"
#include "optim/lr_scheduler.h"

namespace mgpu {

// The data set options of `config` (seeded with config.seed).
DatasetOptions DatasetOptionsFrom(const TrainConfig& config);
// DDP's bucket sizes, gradient views, unused-parameter search, buffer broadcast and compression.
DdpOptions DdpOptionsFrom(const TrainConfig& config);
// The schedule of a run with `steps_per_epoch` optimizer steps per epoch (from EffectiveLr).
SchedulerOptions SchedulerOptionsFrom(const TrainConfig& config, int64_t steps_per_epoch);

}  // namespace mgpu
