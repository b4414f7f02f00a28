#include "amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

GradScaler::GradScaler(LossScaling scaling, torch::Device device, GradScalerOptions options)
    : scaling_(scaling), options_(options) {
  const auto on_device = torch::TensorOptions().device(device);
  double initial = 1.0;
  if (scaling_.mode == LossScaling::Mode::kDynamic) initial = options_.init_scale;
  if (scaling_.mode == LossScaling::Mode::kStatic) initial = scaling_.static_scale;
  // Shapes and dtypes as torch.amp.GradScaler's, which the ATen kernels require.
  scale_ = torch::full({}, initial, on_device.dtype(torch::kFloat));
  growth_tracker_ = torch::zeros({}, on_device.dtype(torch::kInt));
  found_inf_ = torch::zeros({}, on_device.dtype(torch::kFloat));
  skipped_ = torch::zeros({}, on_device.dtype(torch::kLong));
}

torch::Tensor GradScaler::Scale(const torch::Tensor& loss) const {
  return enabled() ? loss * scale_ : loss;
}

void GradScaler::CheckGradients(FusedOptimizer& optimizer, const torch::Tensor& inv_scale) {
  // The multi-tensor kernel takes one dtype per call (o2 mixes float16 and float32).
  std::map<int, std::vector<torch::Tensor>> by_dtype;
  for (const auto& grad : optimizer.Gradients()) by_dtype[static_cast<int>(grad.scalar_type())].push_back(grad);
  torch::NoGradGuard no_grad;
  for (auto& [dtype, grads] : by_dtype) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  }
}

void GradScaler::Unscale(FusedOptimizer& optimizer) {
  if (!enabled() || unscaled_) return;
  found_inf_.zero_();
  // In double, as PyTorch: 1/scale is exact for powers of two and close for static scales.
  CheckGradients(optimizer, scale_.to(torch::kDouble).reciprocal().to(torch::kFloat));
  unscaled_ = true;
}

void GradScaler::Step(FusedOptimizer& optimizer, const torch::Tensor& skip) {
  torch::NoGradGuard no_grad;
  if (!enabled() && !skip.defined() && !all_reduce_found_inf_) {
    optimizer.Step();  // nothing to check: the plain fp32 path stays as cheap as before
    return;
  }
  if (!enabled()) {
    found_inf_.zero_();
  } else if (!unscaled_) {
    // Check only (inverse scale 1); the fused kernel divides by the scale as it steps.
    found_inf_.zero_();
    CheckGradients(optimizer, torch::ones_like(scale_));
  }
  FoldInSkipAndAgree(skip);
  std::optional<torch::Tensor> grad_scale;
  if (enabled() && !unscaled_) grad_scale = scale_;
  optimizer.Step(grad_scale, found_inf_);
  skipped_.add_(found_inf_.to(torch::kLong));
}

std::optional<torch::Tensor> GradScaler::BeginStepInParts(const torch::Tensor& skip) {
  if (enabled()) {
    throw Error(ExitCode::kFailure, "GradScaler::BeginStepInParts: loss scaling checks every gradient before the "
                                    "optimizer steps, so the step cannot be taken in parts");
  }
  if (!skip.defined() && !all_reduce_found_inf_) return std::nullopt;
  torch::NoGradGuard no_grad;
  found_inf_.zero_();
  FoldInSkipAndAgree(skip);
  skipped_.add_(found_inf_.to(torch::kLong));
  return found_inf_;
}

// found_inf_ also set where `skip` is, then the same on every rank (all_reduce_found_inf_).
void GradScaler::FoldInSkipAndAgree(const torch::Tensor& skip) {
  if (skip.defined()) found_inf_.copy_(torch::maximum(found_inf_, skip.to(torch::kFloat).reshape({})));
  if (all_reduce_found_inf_) all_reduce_found_inf_(found_inf_);
}

void GradScaler::Update() {
  if (scaling_.mode == LossScaling::Mode::kDynamic) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor, options_.backoff_factor,
                           options_.growth_interval);
  }
  unscaled_ = false;
}

double GradScaler::scale() const { return scale_.item<double>(); }

int64_t GradScaler::skipped_steps() const { return skipped_.item<int64_t>(); }

std::vector<torch::Tensor> GradScaler::StateTensors() const {
  return {scale_.clone(), growth_tracker_.clone(), skipped_.clone()};
}

void GradScaler::LoadStateTensors(const std::vector<torch::Tensor>& state) {
  const bool well_formed = state.size() == 3 && std::all_of(state.begin(), state.end(), [](const torch::Tensor& t) {
                             return t.defined() && t.numel() == 1;
                           });
  if (!well_formed) {
    throw BadInputError(fmt::format("loss scaler state holds {} tensors; expected 3 one-element tensors "
                                    "(scale, growth tracker, skipped steps): the checkpoint is not a GradScaler's",
                                    state.size()));
  }
  torch::NoGradGuard no_grad;
  scale_.copy_(state[0].reshape({}));
  growth_tracker_.copy_(state[1].reshape({}));
  skipped_.copy_(state[2].reshape({}));
}

}  // namespace mgpu
