// GradScaler: torch.amp.GradScaler for mgpu's FusedOptimizer, with the same semantics and
// defaults. A step is
//
//   scaler.Scale(loss).backward();
//   scaler.Unscale(optimizer);       // only when the gradients are needed unscaled (clipping)
//   scaler.Step(optimizer);          // skipped where a gradient is inf or NaN
//   scaler.Update();                 // dynamic: grow or back off the scale
//
// Dynamic scaling starts at 2^16; a step with a non-finite gradient is skipped, the scale is
// multiplied by 0.5 and the count of clean steps reset; after 2000 consecutive clean steps the
// scale is multiplied by 2. Static scaling multiplies by a fixed scale and still skips
// non-finite steps. With scaling off the scaler passes the loss through and steps plainly.
//
// The scale, the growth tracker and found_inf live on the training device and are updated by
// ATen's own kernels (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_, both with
// CPU and CUDA kernels in LibTorch 2.11): no host synchronization per step. Reading scale() or
// skipped_steps() synchronizes; do it at log points.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/loss_scaling.h"
#include "optim/fused_optimizer.h"

namespace mgpu {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, torch.amp.GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  // For kStatic, the scale is scaling.static_scale and `options` are not used.
  GradScaler(LossScaling scaling, torch::Device device, GradScalerOptions options = {});

  bool enabled() const { return scaling_.mode != LossScaling::Mode::kNone; }
  LossScaling::Mode mode() const { return scaling_.mode; }

  // loss × scale (the loss unchanged when scaling is off). Compute the loss in float32: the
  // default scale 2^16 is already beyond float16's range.
  torch::Tensor Scale(const torch::Tensor& loss) const;

  // Divides the optimizer's gradients by the scale in place and records in found_inf whether
  // any is inf or NaN. Once per step: later calls before Update() do nothing (as PyTorch's
  // unscale_ would, minus its error). A no-op when scaling is off.
  void Unscale(FusedOptimizer& optimizer);

  // Steps the optimizer unless a gradient is non-finite (or `skip`, a one-element device
  // tensor, is non-zero: the trainer passes a non-finite loss this way). Without a prior
  // Unscale, the scale is handed to the fused kernel, which unscales while it steps — what
  // PyTorch does for fused optimizers. Counts skipped steps.
  void Step(FusedOptimizer& optimizer, const torch::Tensor& skip = {});

  // For an optimizer stepped in parts as their gradients become final (DDP's buckets in a
  // graphed step), instead of Step: only without loss scaling, whose check needs every gradient
  // first (throws Error if scaling is on). Counts the step as skipped where `skip` (as in Step)
  // is set, and returns the found_inf that every part passes to FusedOptimizer::StepParameters:
  // nullopt when nothing can skip the step.
  std::optional<torch::Tensor> BeginStepInParts(const torch::Tensor& skip = {});

  // Dynamic scaling: backs off or grows the scale from this step's found_inf. Ends the step.
  void Update();

  // Called after found_inf is known and before the optimizer steps, so that DDP ranks can
  // agree to skip together: the hook must all-reduce found_inf in place with MAX (the fused
  // kernels skip where it is exactly 1).
  void SetAllReduceFoundInf(std::function<void(torch::Tensor& found_inf)> hook) {
    all_reduce_found_inf_ = std::move(hook);
  }

  // The current scale as a one-element float32 device tensor (1 when scaling is off).
  const torch::Tensor& scale_tensor() const { return scale_; }
  // 1 where the last Step was skipped.
  const torch::Tensor& found_inf() const { return found_inf_; }
  // Host copies; these synchronize with the device.
  double scale() const;
  int64_t skipped_steps() const;

  // Scaler state for checkpoints: {scale, growth tracker} as torch's state_dict holds them, plus
  // the count of skipped steps (summary.json's skipped_steps continues across a resume).
  std::vector<torch::Tensor> StateTensors() const;
  // Restores what StateTensors returned; throws BadInputError on a count or shape mismatch.
  void LoadStateTensors(const std::vector<torch::Tensor>& state);

 private:
  // Checks (and with unscale, divides) the optimizer's gradients, accumulating into found_inf_.
  void CheckGradients(FusedOptimizer& optimizer, const torch::Tensor& inv_scale);
  void FoldInSkipAndAgree(const torch::Tensor& skip);

  LossScaling scaling_;
  GradScalerOptions options_;
  torch::Tensor scale_;           // float32, one element
  torch::Tensor growth_tracker_;  // int32: consecutive clean steps
  torch::Tensor found_inf_;       // float32, one element: 0 or 1
  torch::Tensor skipped_;         // int64: steps skipped so far
  bool unscaled_ = false;         // Unscale() ran for the current step
  std::function<void(torch::Tensor&)> all_reduce_found_inf_;
};

}  // namespace mgpu
