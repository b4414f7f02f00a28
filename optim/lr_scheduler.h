// Learning-rate schedules with torch.optim.lr_scheduler's formulas:
//
//   none       the base lr throughout.
//   multistep  MultiStepLR, stepped once per epoch: during epoch e (from 0) the lr is
//              base × gamma^(number of milestones ≤ e).
//   cosine     per optimizer step t (from 0): a linear warm-up over W steps,
//              base × (t + 1) / W (LinearLR with start_factor 1/W, total_iters W − 1), then
//              CosineAnnealingLR over the remaining T = total − W steps:
//              min_lr + (base − min_lr) × (1 + cos(π (t − W) / T)) / 2.
//              (SequentialLR of the two, milestone W.) `total` is the whole run's steps
//              (epochs × steps per epoch), never --max-steps, so that a run stopped early and
//              resumed follows the same curve as an uninterrupted one.
//   plateau    ReduceLROnPlateau(mode=min, threshold=1e-4 rel, cooldown 0, eps 1e-8), stepped
//              once per epoch with the test loss: a loss below best × (1 − 1e-4) is the new
//              best; after more than `patience` epochs without one, lr ← max(lr × factor,
//              min_lr) and the count starts again.
//
// The schedule only computes a double; the trainer hands it to FusedOptimizer::set_lr, which
// passes it by value to the fused kernels: changing it every step costs no synchronization.
// The whole state is a handful of numbers (State) that checkpoints save and restore.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.h"  // SchedulerNames

namespace mgpu {

struct SchedulerOptions {
  std::string kind = "none";     // none | multistep | cosine | plateau
  double base_lr = 1e-3;         // after --lr-scale-rule
  std::vector<int64_t> milestones;  // multistep: epochs, increasing
  double gamma = 0.1;            // multistep
  int64_t warmup_steps = 0;      // cosine
  double min_lr = 0.0;           // cosine: the final lr; plateau: the floor
  int64_t total_steps = 0;       // cosine: the run's optimizer steps
  double plateau_factor = 0.1;
  int64_t plateau_patience = 10;
};

class LrScheduler {
 public:
  // What changes as the run goes; the rest follows from the options.
  struct State {
    int64_t steps = 0;       // optimizer steps taken
    int64_t epochs = 0;      // epochs completed
    double lr = 0;           // the lr of the next step
    double best = 0;         // plateau: best test loss so far (+inf before the first)
    int64_t bad_epochs = 0;  // plateau: epochs since the best
  };

  // Throws BadInputError for an unknown kind or impossible options (naming the flag).
  explicit LrScheduler(SchedulerOptions options);

  // The lr for the next optimizer step.
  double lr() const { return state_.lr; }
  // After every optimizer step.
  void OnStep();
  // After every completed epoch, with that epoch's test loss.
  void OnEpochEnd(double test_loss);

  const SchedulerOptions& options() const { return options_; }
  const State& state() const { return state_; }
  void Restore(const State& state) { state_ = state; }

 private:
  double CosineLr(int64_t step) const;

  SchedulerOptions options_;
  State state_;
};

}  // namespace mgpu
