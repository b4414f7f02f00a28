// One training process's whole run: data → model → optimizer → epochs of training and
// evaluation, with the timings, metrics and summary the contract describes.
#pragma once

#include <nlohmann/json.hpp>

#include "ddp/world.h"
#include "worker/run_outputs.h"
#include "worker/train_config.h"

namespace mgpu {

// Trains as `config` says and returns the run's summary (status "ok"). Throws mgpu::Error
// (bad input, divergence) or other exceptions; the caller turns them into a failed summary.
// `summary` receives the fields known so far even when it throws, so a failure report keeps
// the configuration and the epochs already done.
void Train(const TrainConfig& config, const WorldInfo& world, RunOutputs& outputs,
           nlohmann::json& summary);

// The contract's summary fields that come from the configuration alone.
nlohmann::json SummaryFromConfig(const TrainConfig& config, const WorldInfo& world);

}  // namespace mgpu
