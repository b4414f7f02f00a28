// SGD (momentum, Nesterov, weight decay), Adam and AdamW stepping all parameters with one fused
// multi-tensor ATen kernel per (device, dtype) group — `_fused_sgd_`, `_fused_adam_`,
// `_fused_adamw_`, as torch.optim does with fused=True — instead of LibTorch's C++
// optimizers, which launch several kernels per parameter.
//
// Semantics are torch.optim's: same update rules, same defaults (Adam betas 0.9/0.999,
// eps 1e-8), Adam's weight decay added to the gradient, AdamW's decoupled. Step() takes the
// GradScaler's optional scale and found-inf flag: gradients are unscaled inside the kernel and
// the update is skipped where found_inf is non-zero.
//
// With `master_weights`, float16/bfloat16 parameters are stepped through float32 master
// copies that the optimizer keeps (the o2 policy): each step copies the low-precision
// gradients into float32, steps the masters, and copies them back into the model, so small
// updates are not rounded away by a float16 parameter. float32 parameters (BatchNorm under o2)
// are stepped directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

struct OptimizerOptions {
  std::string kind = "adam";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.0;      // sgd
  bool nesterov = false;      // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  bool master_weights = false;  // float32 masters for float16/bfloat16 parameters
};

class FusedOptimizer {
 public:
  // Throws BadInputError for an unknown kind or inconsistent options (e.g. Nesterov without
  // momentum).
  FusedOptimizer(std::vector<torch::Tensor> parameters, OptimizerOptions options);

  // Sets every parameter's gradient to none (the next backward allocates it afresh).
  void ZeroGrad();
  // The gradients the next Step applies, one per stepped parameter that has one: the model's
  // own, or with master weights float32 copies of the model's gradients, made by the first call
  // after backward (call it after the step's last backward). The GradScaler unscales and checks
  // these in place.
  std::vector<torch::Tensor> Gradients();
  // The tensors Step updates: the model's parameters, or their float32 masters where kept.
  // Their grad() is what Gradients() returns (for gradient clipping).
  const std::vector<torch::Tensor>& stepped_parameters() const { return stepped_; }
  // Scales Gradients() so that their global L2 norm is at most max_norm
  // (torch::nn::utils::clip_grad_norm_) and returns the norm before clipping. Reads the norm
  // back to the host: one synchronization per call. Unscale the gradients first.
  double ClipGradNorm(double max_norm);
  // One update of every parameter that has a gradient. `grad_scale`/`found_inf` are
  // single-element float tensors on the parameters' device (see the header comment).
  void Step(const std::optional<torch::Tensor>& grad_scale = std::nullopt,
            const std::optional<torch::Tensor>& found_inf = std::nullopt);
  // As Step, for the parameters at `indices` (positions in the constructor's list) only: a step
  // taken in parts as their gradients become final (DDP's buckets). Each parameter must be in
  // exactly one part of a step (Adam counts its steps per parameter). Throws Error for an index
  // out of range.
  void StepParameters(const std::vector<size_t>& indices, const std::optional<torch::Tensor>& grad_scale = std::nullopt,
                      const std::optional<torch::Tensor>& found_inf = std::nullopt);

  double lr() const { return options_.lr; }
  // With the learning rate kept on the device, also refills those tensors (one small kernel,
  // only when the value changes).
  void set_lr(double lr);
  // From now on the fused kernels read the learning rate from a float32 tensor on each group's
  // device instead of taking it as an argument, so a CUDA graph that captured Step() follows
  // later set_lr() calls. Call before the first Step() that a graph captures.
  void KeepLrOnDevice();
  const OptimizerOptions& options() const { return options_; }

  // Optimizer state for checkpoints: step counts, moments or momentum buffers and master
  // weights (undefined where not kept), by parameter.
  std::vector<torch::Tensor> StateTensors() const;
  // Restores what StateTensors returned; throws BadInputError on a count or shape mismatch.
  void LoadStateTensors(const std::vector<torch::Tensor>& state);

 private:
  struct Group {  // parameters sharing a device and dtype, stepped by one kernel call
    std::vector<size_t> members;
    torch::Tensor lr;  // () float32 on the group's device, after KeepLrOnDevice(); else undefined
  };
  void RefreshMasterGradient(size_t i);
  void StepGroup(const Group& group, const std::vector<bool>& selected, const std::optional<torch::Tensor>& grad_scale,
                 const std::optional<torch::Tensor>& found_inf);

  std::vector<torch::Tensor> parameters_;  // the model's
  std::vector<torch::Tensor> stepped_;     // parameters_[i] or its float32 master
  std::vector<bool> has_master_;
  bool master_grads_current_ = false;      // Gradients() copied this step's model gradients
  OptimizerOptions options_;
  std::vector<Group> groups_;
  // Per parameter; undefined until the first step that sees a gradient.
  std::vector<torch::Tensor> steps_;       // adam/adamw: float32 step counts
  std::vector<torch::Tensor> exp_avg_;     // adam/adamw: first moments
  std::vector<torch::Tensor> exp_avg_sq_;  // adam/adamw: second moments
  std::vector<torch::Tensor> momentum_;    // sgd with momentum: velocity buffers
};

}  // namespace mgpu
