// The start-up table: the options a run changed from their defaults, then what it resolved from
// them (device, data, precision, step execution...), logged once per job.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

#include "ddp/world.h"
#include "worker/train_config.h"

namespace mgpu {

// One resolved row: a name and its value.
using StartupRow = std::pair<std::string, std::string>;

// Logs the table on rank 0 only (the ranks of one job share the configuration; config.yaml has
// every option); the other ranks log one line saying where it is.
void LogStartupTable(spdlog::logger& log, const WorldInfo& world, const TrainConfig& config,
                     const std::vector<StartupRow>& resolved);

}  // namespace mgpu
