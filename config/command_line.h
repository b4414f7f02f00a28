// mgpu-worker's command line: every option of the single option table (config/train_config.h)
// as a flag, plus --config FILE. Shared by mgpu-worker and by `mgpu run`, which validates the
// worker flags before it starts any worker, so a bad configuration fails once, with exit 2.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/train_config.h"

namespace mgpu {

// Parses `args` (without the program name): defaults < --config FILE < flags, then the checks of
// ResolveSeedSpellings and ValidateConfig. Returns nullopt after printing --help (exit_code
// set). Throws BadInputError naming the flag, file or key for anything invalid.
std::optional<TrainConfig> ParseWorkerCommandLine(const std::vector<std::string>& args, int& exit_code);

// The default output folder runs/<timestamp>-<model>-<dataset>-<mode>, with a -2, -3.. suffix
// when it exists already.
std::string DefaultOutputFolder(const TrainConfig& config);

}  // namespace mgpu
