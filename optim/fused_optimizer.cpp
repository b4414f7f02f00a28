#include "optim/fused_optimizer.h"

#include <map>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

FusedOptimizer::FusedOptimizer(std::vector<torch::Tensor> parameters, OptimizerOptions options)
    : parameters_(std::move(parameters)), options_(std::move(options)) {
  if (options_.kind != "sgd" && options_.kind != "adam" && options_.kind != "adamw") {
    throw BadInputError(fmt::format("unknown optimizer '{}'; available: sgd, adam, adamw", options_.kind));
  }
  if (options_.nesterov && (options_.kind != "sgd" || options_.momentum <= 0)) {
    throw BadInputError("Nesterov momentum needs --optimizer sgd and --momentum > 0");
  }
  std::map<std::pair<std::string, int>, size_t> group_of;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto key = std::make_pair(parameters_[i].device().str(), static_cast<int>(parameters_[i].scalar_type()));
    auto [it, inserted] = group_of.emplace(key, groups_.size());
    if (inserted) groups_.emplace_back();
    groups_[it->second].members.push_back(i);
  }
  steps_.resize(parameters_.size());
  exp_avg_.resize(parameters_.size());
  exp_avg_sq_.resize(parameters_.size());
  momentum_.resize(parameters_.size());
}

void FusedOptimizer::ZeroGrad() {
  for (auto& p : parameters_) p.mutable_grad().reset();
}

void FusedOptimizer::Step(const std::optional<torch::Tensor>& grad_scale,
                          const std::optional<torch::Tensor>& found_inf) {
  torch::NoGradGuard no_grad;
  for (const auto& group : groups_) StepGroup(group, grad_scale, found_inf);
}

void FusedOptimizer::StepGroup(const Group& group, const std::optional<torch::Tensor>& grad_scale,
                               const std::optional<torch::Tensor>& found_inf) {
  std::vector<torch::Tensor> params, grads, first, second, steps, velocity;
  bool first_sgd_step = false;
  for (size_t i : group.members) {
    const torch::Tensor& grad = parameters_[i].grad();
    if (!grad.defined()) continue;
    params.push_back(parameters_[i]);
    grads.push_back(grad);
    if (options_.kind == "sgd") {
      if (options_.momentum > 0) {
        if (!momentum_[i].defined()) {
          momentum_[i] = torch::empty_like(parameters_[i]);  // the kernel fills it on its first step
          first_sgd_step = true;
        }
        velocity.push_back(momentum_[i]);
      }
    } else {
      if (!steps_[i].defined()) {
        steps_[i] = torch::zeros({}, parameters_[i].options().dtype(torch::kFloat32));
        exp_avg_[i] = torch::zeros_like(parameters_[i], torch::MemoryFormat::Preserve);
        exp_avg_sq_[i] = torch::zeros_like(parameters_[i], torch::MemoryFormat::Preserve);
      }
      steps.push_back(steps_[i]);
      first.push_back(exp_avg_[i]);
      second.push_back(exp_avg_sq_[i]);
    }
  }
  if (params.empty()) return;
  if (options_.kind == "sgd") {
    at::_fused_sgd_(params, grads, velocity, options_.weight_decay, options_.momentum, options_.lr,
                    /*dampening=*/0.0, options_.nesterov, /*maximize=*/false, first_sgd_step, grad_scale,
                    found_inf);
    return;
  }
  // As torch.optim's fused Adam: count the step first, and take it back where it was skipped.
  torch::_foreach_add_(steps, 1);
  if (options_.kind == "adam") {
    at::_fused_adam_(params, grads, first, second, /*max_exp_avg_sqs=*/{}, steps, options_.lr, options_.beta1,
                     options_.beta2, options_.weight_decay, options_.eps, /*amsgrad=*/false,
                     /*maximize=*/false, grad_scale, found_inf);
  } else {
    at::_fused_adamw_(params, grads, first, second, /*max_exp_avg_sqs=*/{}, steps, options_.lr, options_.beta1,
                      options_.beta2, options_.weight_decay, options_.eps, /*amsgrad=*/false,
                      /*maximize=*/false, grad_scale, found_inf);
  }
  if (found_inf) torch::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), *found_inf));
}

std::vector<torch::Tensor> FusedOptimizer::StateTensors() const {
  std::vector<torch::Tensor> state;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    state.insert(state.end(), {steps_[i], exp_avg_[i], exp_avg_sq_[i], momentum_[i]});
  }
  return state;
}

void FusedOptimizer::LoadStateTensors(const std::vector<torch::Tensor>& state) {
  if (state.size() != 4 * parameters_.size()) {
    throw BadInputError(fmt::format("optimizer state holds {} tensors; this model needs {} (4 per "
                                    "parameter): the checkpoint is from another model or optimizer",
                                    state.size(), 4 * parameters_.size()));
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    for (size_t k = 1; k < 4; ++k) {
      const torch::Tensor& t = state[4 * i + k];
      if (t.defined() && t.sizes() != parameters_[i].sizes()) {
        throw BadInputError(fmt::format("optimizer state of parameter {} has shape {}, the parameter {}", i,
                                        fmt::join(t.sizes(), "x"), fmt::join(parameters_[i].sizes(), "x")));
      }
    }
    auto to_param = [&](const torch::Tensor& t) {
      return t.defined() ? t.to(parameters_[i].device()) : torch::Tensor();
    };
    steps_[i] = to_param(state[4 * i]);
    exp_avg_[i] = to_param(state[4 * i + 1]);
    exp_avg_sq_[i] = to_param(state[4 * i + 2]);
    momentum_[i] = to_param(state[4 * i + 3]);
  }
}

}  // namespace mgpu
