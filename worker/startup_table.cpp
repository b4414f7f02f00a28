#include "worker/startup_table.h"

#include <algorithm>

namespace mgpu {

void LogStartupTable(spdlog::logger& log, const WorldInfo& world, const TrainConfig& config,
                     const std::vector<StartupRow>& resolved) {
  if (world.rank != 0) {
    log.info("rank {} of {}: the configuration is in rank 0's log and config.yaml", world.rank, world.world_size);
    return;
  }
  const TrainConfig defaults;
  std::vector<StartupRow> changed;
  for (const auto& spec : TrainOptions()) {
    if (spec.saved && spec.get(config) != spec.get(defaults)) changed.emplace_back(spec.name, spec.get(config));
  }
  size_t width = 0;
  for (const auto& rows : {changed, resolved}) {
    for (const auto& [key, value] : rows) width = std::max(width, key.size());
  }
  const std::string rule(width + 40, '-');
  log.info("{}", rule);
  log.info("{:<{}} | {}", "options set", width,
           changed.empty() ? "none: every option at its default" : "those that differ from the defaults");
  for (const auto& [key, value] : changed) log.info("{:<{}} | {}", key, width, value);
  log.info("{}", rule);
  for (const auto& [key, value] : resolved) log.info("{:<{}} | {}", key, width, value);
  log.info("{}", rule);
}

}  // namespace mgpu
