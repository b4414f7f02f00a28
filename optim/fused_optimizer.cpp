#include "optim/fused_optimizer.h"

#include <map>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// StateTensors(): step count, first moment, second moment, momentum buffer, master weight.
constexpr size_t kStatePerParameter = 5;

}  // namespace

FusedOptimizer::FusedOptimizer(std::vector<torch::Tensor> parameters, OptimizerOptions options)
    : parameters_(std::move(parameters)), options_(std::move(options)) {
  if (options_.kind != "sgd" && options_.kind != "adam" && options_.kind != "adamw") {
    throw BadInputError(fmt::format("unknown optimizer '{}'; available: sgd, adam, adamw", options_.kind));
  }
  if (options_.nesterov && (options_.kind != "sgd" || options_.momentum <= 0)) {
    throw BadInputError("Nesterov momentum needs --optimizer sgd and --momentum > 0");
  }
  for (const auto& p : parameters_) {
    const bool low_precision = p.scalar_type() == torch::kHalf || p.scalar_type() == torch::kBFloat16;
    has_master_.push_back(options_.master_weights && low_precision);
    stepped_.push_back(has_master_.back() ? p.detach().to(torch::kFloat).requires_grad_() : p);
  }
  std::map<std::pair<std::string, int>, size_t> group_of;
  for (size_t i = 0; i < stepped_.size(); ++i) {
    const auto key = std::make_pair(stepped_[i].device().str(), static_cast<int>(stepped_[i].scalar_type()));
    auto [it, inserted] = group_of.emplace(key, groups_.size());
    if (inserted) groups_.emplace_back();
    groups_[it->second].members.push_back(i);
  }
  steps_.resize(parameters_.size());
  exp_avg_.resize(parameters_.size());
  exp_avg_sq_.resize(parameters_.size());
  momentum_.resize(parameters_.size());
}

void FusedOptimizer::set_lr(double lr) {
  if (lr == options_.lr) return;
  options_.lr = lr;
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    if (group.lr.defined()) group.lr.fill_(lr);
  }
}

void FusedOptimizer::KeepLrOnDevice() {
  for (auto& group : groups_) {
    const torch::Tensor& member = stepped_[group.members.front()];
    group.lr = torch::full({}, options_.lr, member.options().dtype(torch::kFloat32).requires_grad(false));
  }
}

void FusedOptimizer::ZeroGrad() {
  for (auto& p : parameters_) p.mutable_grad().reset();
  for (size_t i = 0; i < stepped_.size(); ++i) {
    if (has_master_[i]) stepped_[i].mutable_grad().reset();
  }
  master_grads_current_ = false;
}

std::vector<torch::Tensor> FusedOptimizer::Gradients() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (size_t i = 0; i < stepped_.size(); ++i) {
    if (!parameters_[i].grad().defined()) continue;
    RefreshMasterGradient(i);
    grads.push_back(stepped_[i].grad());
  }
  master_grads_current_ = true;
  return grads;
}

// Parameter i's float32 master gradient, where it has a master, copied from its model gradient
// unless Gradients() already did this step (ClipGradNorm may have clipped that copy since).
void FusedOptimizer::RefreshMasterGradient(size_t i) {
  const torch::Tensor& model_grad = parameters_[i].grad();
  if (has_master_[i] && !master_grads_current_ && model_grad.defined()) {
    stepped_[i].mutable_grad() = model_grad.to(torch::kFloat);
  }
}

double FusedOptimizer::ClipGradNorm(double max_norm) {
  Gradients();  // brings master gradients up to date
  std::vector<torch::Tensor> with_grad;
  for (size_t i = 0; i < stepped_.size(); ++i) {
    if (parameters_[i].grad().defined()) with_grad.push_back(stepped_[i]);
  }
  return torch::nn::utils::clip_grad_norm_(with_grad, max_norm);
}

void FusedOptimizer::Step(const std::optional<torch::Tensor>& grad_scale,
                          const std::optional<torch::Tensor>& found_inf) {
  std::vector<size_t> every(stepped_.size());
  for (size_t i = 0; i < every.size(); ++i) every[i] = i;
  StepParameters(every, grad_scale, found_inf);
}

void FusedOptimizer::StepParameters(const std::vector<size_t>& indices, const std::optional<torch::Tensor>& grad_scale,
                                    const std::optional<torch::Tensor>& found_inf) {
  std::vector<bool> selected(stepped_.size(), false);
  for (size_t i : indices) {
    if (i >= selected.size()) {
      throw Error(ExitCode::kFailure, fmt::format("FusedOptimizer::StepParameters: parameter {} of {}", i,
                                                  selected.size()));
    }
    selected[i] = true;
  }
  torch::NoGradGuard no_grad;
  for (size_t i : indices) RefreshMasterGradient(i);  // only these: a later part's gradients may not be final yet
  for (const auto& group : groups_) StepGroup(group, selected, grad_scale, found_inf);
  // Where the step was skipped the masters are unchanged, and so is the copy.
  std::vector<torch::Tensor> models, masters;
  for (size_t i = 0; i < stepped_.size(); ++i) {
    if (selected[i] && has_master_[i] && parameters_[i].grad().defined()) {
      models.push_back(parameters_[i]);
      masters.push_back(stepped_[i]);
    }
  }
  if (!models.empty()) torch::_foreach_copy_(models, masters);
  master_grads_current_ = false;
}

void FusedOptimizer::StepGroup(const Group& group, const std::vector<bool>& selected,
                               const std::optional<torch::Tensor>& grad_scale,
                               const std::optional<torch::Tensor>& found_inf) {
  std::vector<torch::Tensor> params, grads, first, second, steps, velocity;
  for (size_t i : group.members) {
    const torch::Tensor& grad = stepped_[i].grad();
    if (!selected[i] || !grad.defined() || !parameters_[i].grad().defined()) continue;
    params.push_back(stepped_[i]);
    grads.push_back(grad);
    if (options_.kind == "sgd") {
      if (options_.momentum > 0) {
        // Zeros, not the kernel's first-step fill: a step skipped for a non-finite gradient (the
        // first ones often are under dynamic loss scaling) would leave that fill undone and the
        // next step would read uninitialized memory. With dampening 0, momentum 0 makes the first
        // step taken set the buffer to its gradient, as torch.optim's SGD does.
        if (!momentum_[i].defined()) momentum_[i] = torch::zeros_like(stepped_[i]);
        velocity.push_back(momentum_[i]);
      }
    } else {
      if (!steps_[i].defined()) {
        steps_[i] = torch::zeros({}, stepped_[i].options().dtype(torch::kFloat32));
        exp_avg_[i] = torch::zeros_like(stepped_[i], torch::MemoryFormat::Preserve);
        exp_avg_sq_[i] = torch::zeros_like(stepped_[i], torch::MemoryFormat::Preserve);
      }
      steps.push_back(steps_[i]);
      first.push_back(exp_avg_[i]);
      second.push_back(exp_avg_sq_[i]);
    }
  }
  if (params.empty()) return;
  if (options_.kind == "sgd") {
    auto sgd = [&](const auto& lr) {
      at::_fused_sgd_(params, grads, velocity, options_.weight_decay, options_.momentum, lr,
                      /*dampening=*/0.0, options_.nesterov, /*maximize=*/false, /*is_first_step=*/false,
                      grad_scale, found_inf);
    };
    if (group.lr.defined()) {
      sgd(group.lr);
    } else {
      sgd(options_.lr);
    }
    return;
  }
  // As torch.optim's fused Adam: count the step first, and take it back where it was skipped.
  torch::_foreach_add_(steps, 1);
  // The kernels take the learning rate as a number or, for captured graphs, as a tensor.
  auto adam = [&](const auto& lr) {
    if (options_.kind == "adam") {
      at::_fused_adam_(params, grads, first, second, /*max_exp_avg_sqs=*/{}, steps, lr, options_.beta1,
                       options_.beta2, options_.weight_decay, options_.eps, /*amsgrad=*/false,
                       /*maximize=*/false, grad_scale, found_inf);
    } else {
      at::_fused_adamw_(params, grads, first, second, /*max_exp_avg_sqs=*/{}, steps, lr, options_.beta1,
                        options_.beta2, options_.weight_decay, options_.eps, /*amsgrad=*/false,
                        /*maximize=*/false, grad_scale, found_inf);
    }
  };
  if (group.lr.defined()) {
    adam(group.lr);
  } else {
    adam(options_.lr);
  }
  if (found_inf) torch::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), *found_inf));
}

std::vector<torch::Tensor> FusedOptimizer::StateTensors() const {
  std::vector<torch::Tensor> state;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    state.insert(state.end(), {steps_[i], exp_avg_[i], exp_avg_sq_[i], momentum_[i],
                               has_master_[i] ? stepped_[i].detach() : torch::Tensor()});
  }
  return state;
}

void FusedOptimizer::LoadStateTensors(const std::vector<torch::Tensor>& state) {
  if (state.size() != kStatePerParameter * parameters_.size()) {
    throw BadInputError(fmt::format("optimizer state holds {} tensors; this model needs {} ({} per "
                                    "parameter): the checkpoint is from another model or optimizer",
                                    state.size(), kStatePerParameter * parameters_.size(),
                                    kStatePerParameter));
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    for (size_t k = 1; k < kStatePerParameter; ++k) {
      const torch::Tensor& t = state[kStatePerParameter * i + k];
      if (t.defined() && t.sizes() != parameters_[i].sizes()) {
        throw BadInputError(fmt::format("optimizer state of parameter {} has shape {}, the parameter {}", i,
                                        fmt::join(t.sizes(), "x"), fmt::join(parameters_[i].sizes(), "x")));
      }
    }
    auto to_param = [&](const torch::Tensor& t) {
      return t.defined() ? t.to(stepped_[i].device()) : torch::Tensor();
    };
    const torch::Tensor* s = &state[kStatePerParameter * i];
    steps_[i] = to_param(s[0]);
    exp_avg_[i] = to_param(s[1]);
    exp_avg_sq_[i] = to_param(s[2]);
    momentum_[i] = to_param(s[3]);
    // A checkpoint without masters (saved by an fp32 or fp16 run) keeps the ones made from the
    // model's parameters.
    if (has_master_[i] && s[4].defined()) {
      torch::NoGradGuard no_grad;
      stepped_[i].copy_(s[4]);
    }
  }
}

}  // namespace mgpu
