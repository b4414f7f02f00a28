// `mgpu compare`: runs a plan's runs one after another and reports them side by side.
#pragma once

#include <string>

#include "launcher/compare/compare_plan.h"

namespace mgpu {

// Runs every planned run in `out`/<run name> (one mgpu-worker, or `mgpu run --nproc-per-node
// auto` for mode: ddp), `repeat` times (>= 1; in `out`/<run name>/repeat-K when more than once),
// rewriting the reports after each run. A failed run is reported in its row and does not stop the
// rest. A stop signal (common/stop_signal.h; this installs its handlers) is passed on to the
// running row, and no later row starts. Returns 0 when every run succeeded, 128 + signal when
// stopped, else 1. Throws mgpu::Error if `out` cannot be written.
int RunComparison(const ComparePlan& plan, const std::string& plan_text, const std::string& out, int repeat);

}  // namespace mgpu
