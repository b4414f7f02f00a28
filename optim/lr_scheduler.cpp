#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// ReduceLROnPlateau's defaults.
constexpr double kPlateauThreshold = 1e-4;
constexpr double kPlateauEps = 1e-8;

}  // namespace

LrScheduler::LrScheduler(SchedulerOptions options) : options_(std::move(options)) {
  const auto& names = SchedulerNames();
  if (std::find(names.begin(), names.end(), options_.kind) == names.end()) {
    throw BadInputError(fmt::format("--scheduler '{}' is not one of: {}", options_.kind, fmt::join(names, ", ")));
  }
  if (options_.kind == "multistep") {
    if (options_.milestones.empty()) {
      throw BadInputError("--scheduler multistep needs --milestones, the epochs at which the lr is multiplied by "
                          "--gamma (e.g. --milestones 30,60)");
    }
    if (!std::is_sorted(options_.milestones.begin(), options_.milestones.end())) {
      throw BadInputError(fmt::format("--milestones {}: the epochs must be in increasing order",
                                      fmt::join(options_.milestones, ",")));
    }
  }
  if (options_.kind == "cosine" && options_.warmup_steps >= options_.total_steps) {
    throw BadInputError(fmt::format("--warmup-epochs covers {} steps, but the run has only {}: shorten the "
                                    "warm-up or train for more epochs",
                                    options_.warmup_steps, options_.total_steps));
  }
  state_.lr = options_.kind == "cosine" ? CosineLr(0) : options_.base_lr;
  state_.best = std::numeric_limits<double>::infinity();
}

double LrScheduler::CosineLr(int64_t step) const {
  const int64_t warmup = options_.warmup_steps;
  if (step < warmup) return options_.base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = static_cast<double>(std::min(step, options_.total_steps) - warmup) /
                          static_cast<double>(options_.total_steps - warmup);
  return options_.min_lr + (options_.base_lr - options_.min_lr) * (1 + std::cos(M_PI * progress)) / 2;
}

void LrScheduler::OnStep() {
  ++state_.steps;
  if (options_.kind == "cosine") state_.lr = CosineLr(state_.steps);
}

void LrScheduler::OnEpochEnd(double test_loss) {
  ++state_.epochs;
  if (options_.kind == "multistep") {
    const auto passed = std::upper_bound(options_.milestones.begin(), options_.milestones.end(), state_.epochs) -
                        options_.milestones.begin();
    state_.lr = options_.base_lr * std::pow(options_.gamma, static_cast<double>(passed));
  } else if (options_.kind == "plateau") {
    if (test_loss < state_.best * (1 - kPlateauThreshold)) {
      state_.best = test_loss;
      state_.bad_epochs = 0;
    } else {
      ++state_.bad_epochs;
    }
    if (state_.bad_epochs > options_.plateau_patience) {
      const double reduced = std::max(state_.lr * options_.plateau_factor, options_.min_lr);
      if (state_.lr - reduced > kPlateauEps) state_.lr = reduced;
      state_.bad_epochs = 0;
    }
  }
}

}  // namespace mgpu
