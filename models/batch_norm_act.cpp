#include "models/batch_norm_act.h"

#include <optional>
#include <variant>

#include "models/fused_kernels.h"

#ifdef MGPU_HAS_FUSED_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "models/kernels/batch_norm_kernels.h"
#endif

namespace mgpu {
namespace {

torch::Tensor AtenBatchNormAct(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& residual,
                               Activation act) {
  torch::Tensor y = bn.forward(x);
  if (residual.defined()) y = y + residual;
  return act == Activation::kRelu ? torch::relu(y) : y;
}

#ifdef MGPU_HAS_FUSED_KERNELS
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x as the kernels' (M, C) rows: a channels-last (N, C, H, W) tensor.
kernels::BatchNormShape ShapeOf(const torch::Tensor& x) {
  return kernels::MakeBatchNormShape(x.size(0) * x.size(2) * x.size(3), static_cast<int>(x.size(1)));
}

// t as the kernels' element type (bfloat16 or float32, which FusedBatchNormApplies checked).
template <typename T>
T* Elements(const torch::Tensor& t) {
  return t.defined() ? reinterpret_cast<T*>(t.data_ptr()) : nullptr;
}

// The statistics tensor's rows (4, C): mean, invstd (the backward's), scale, shift.
kernels::BatchNormStatistics StatisticsIn(const torch::Tensor& statistics) {
  float* st = statistics.data_ptr<float>();
  const int64_t c = statistics.size(1);
  return {st, st + c, st + 2 * c, st + 3 * c};
}

// The forward's launch for element type T; returns y.
template <typename T>
torch::Tensor Forward(const torch::Tensor& x, const torch::Tensor& residual, const kernels::BatchNormParameters& p,
                      bool relu, const torch::Tensor& statistics) {
  const auto s = ShapeOf(x);
  torch::Tensor y = torch::empty_like(x, torch::MemoryFormat::ChannelsLast);
  torch::Tensor partials = torch::empty({s.partial_floats()}, x.options().dtype(torch::kFloat));
  C10_CUDA_CHECK(kernels::LaunchBatchNormForward(s, Elements<const T>(x), Elements<const T>(residual), p, relu,
                                                 partials.data_ptr<float>(), StatisticsIn(statistics), Elements<T>(y),
                                                 at::cuda::getCurrentCUDAStream()));
  return y;
}

struct Gradients {
  torch::Tensor x, gamma, beta, residual;
};

// y: the forward's output where the backward reads it (relu with a residual), else undefined; gy2:
// a second consumer's gradient of y, or undefined.
template <typename T>
Gradients Backward(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& gy, const torch::Tensor& gy2,
                   const torch::Tensor& gamma, const torch::Tensor& statistics, bool relu, bool has_residual) {
  const auto s = ShapeOf(x);
  const auto floats = x.options().dtype(torch::kFloat);
  Gradients g{torch::empty_like(x, torch::MemoryFormat::ChannelsLast), torch::empty({s.channels}, floats),
              torch::empty({s.channels}, floats),
              has_residual ? torch::empty_like(x, torch::MemoryFormat::ChannelsLast) : torch::Tensor()};
  torch::Tensor partials = torch::empty({s.partial_floats()}, floats);
  torch::Tensor coefficients = torch::empty({3 * s.channels}, floats);
  C10_CUDA_CHECK(kernels::LaunchBatchNormBackward(
      s, Elements<const T>(x), Elements<const T>(y), Elements<const T>(gy), Elements<const T>(gy2),
      gamma.data_ptr<float>(), StatisticsIn(statistics), relu, partials.data_ptr<float>(),
      coefficients.data_ptr<float>(), g.gamma.data_ptr<float>(), g.beta.data_ptr<float>(), Elements<T>(g.x),
      Elements<T>(g.residual), at::cuda::getCurrentCUDAStream()));
  return g;
}

const float* FloatsOrNull(const std::optional<torch::Tensor>& t) { return t ? t->data_ptr<float>() : nullptr; }


class BatchNormActFunction : public torch::autograd::Function<BatchNormActFunction> {
 public:
  // Optional tensors as std::optional: autograd records an input's device, which an undefined
  // tensor has none of. running_mean, running_var and batches_tracked (num_batches_tracked, which
  // the forward's finalize counts up): none where bn tracks no running statistics; input_bias: a
  // convolution's bias that x lacks (batch_norm_math.h), or none. Returns y, and with `fork` a
  // second tensor of y's storage (ForkedActivation) whose gradient arrives separately.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& gamma,
                               const torch::Tensor& beta, const std::optional<torch::Tensor>& residual,
                               const std::optional<torch::Tensor>& input_bias,
                               const std::optional<torch::Tensor>& running_mean,
                               const std::optional<torch::Tensor>& running_var,
                               const std::optional<torch::Tensor>& batches_tracked, double eps, double momentum,
                               bool relu, bool fork) {
    const c10::cuda::CUDAGuard on_device(x.device());
    kernels::BatchNormParameters p;
    p.gamma = gamma.data_ptr<float>(), p.beta = beta.data_ptr<float>(), p.input_bias = FloatsOrNull(input_bias);
    p.running_mean = running_mean ? running_mean->data_ptr<float>() : nullptr;
    p.running_var = running_var ? running_var->data_ptr<float>() : nullptr;
    p.batches_tracked = batches_tracked ? batches_tracked->data_ptr<int64_t>() : nullptr;
    p.eps = static_cast<float>(eps), p.momentum = static_cast<float>(momentum);
    torch::Tensor statistics = torch::empty({4, x.size(1)}, x.options().dtype(torch::kFloat));
    const torch::Tensor r = residual.value_or(torch::Tensor());
    torch::Tensor y = x.scalar_type() == torch::kBFloat16 ? Forward<kernels::Bf16>(x, r, p, relu, statistics)
                                                          : Forward<float>(x, r, p, relu, statistics);
    ctx->save_for_backward({x, gamma, statistics, relu && residual ? y : torch::Tensor()});
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["residual"] = residual.has_value();
    ctx->saved_data["input_bias"] = input_bias.has_value();
    // An unused output's gradient stays undefined instead of a tensor of zeros to read.
    ctx->set_materialize_grads(false);
    if (!fork) return {y};
    return {y, y.alias()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &gamma = saved[1], &statistics = saved[2], &y = saved[3];
    const bool relu = ctx->saved_data["relu"].toBool(), has_residual = ctx->saved_data["residual"].toBool();
    torch::Tensor gy = AlignedChannelsLast(grads[0]);
    torch::Tensor gy2 = grads.size() > 1 ? AlignedChannelsLast(grads[1]) : torch::Tensor();
    if (!gy.defined()) std::swap(gy, gy2);
    if (!gy.defined()) return variable_list(kInputs);  // no output was used
    const c10::cuda::CUDAGuard on_device(x.device());
    const Gradients g = x.scalar_type() == torch::kBFloat16
                            ? Backward<kernels::Bf16>(x, y, gy, gy2, gamma, statistics, relu, has_residual)
                            : Backward<float>(x, y, gy, gy2, gamma, statistics, relu, has_residual);
    // The input bias's gradient: the sum of gx over the rows, zero (the batch norm subtracts the mean).
    const torch::Tensor g_input_bias =
        ctx->saved_data["input_bias"].toBool() ? torch::zeros({x.size(1)}, gamma.options()) : torch::Tensor();
    return {g.x, g.gamma, g.beta, g.residual, g_input_bias, {}, {}, {}, {}, {}, {}, {}};
  }

 private:
  static constexpr size_t kInputs = 12;  // forward's after ctx
};

bool IsFloatOn(const torch::Tensor& t, const torch::Device& device) {
  return t.defined() && t.scalar_type() == torch::kFloat && t.device() == device && t.is_contiguous();
}

bool ParametersApply(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn) {
  const auto& o = bn.options;
  if (!bn.is_training() || !o.affine() || !o.momentum().has_value() || !IsFloatOn(bn.weight, x.device()) ||
      !IsFloatOn(bn.bias, x.device()) || bn.weight.size(0) != x.size(1)) {
    return false;
  }
  const torch::Tensor& batches = bn.num_batches_tracked;
  return !o.track_running_stats() || (IsFloatOn(bn.running_mean, x.device()) && IsFloatOn(bn.running_var, x.device()) &&
                                      batches.defined() && batches.scalar_type() == torch::kLong &&
                                      batches.device() == x.device() && batches.numel() == 1);
}

// The kernels' act(bn(x + input_bias) + residual), counting the step (in the forward's finalize) as
// BatchNormImplBase::forward does; residual and input_bias may be undefined. With `fork`, y and a
// second tensor of its storage.
variable_list FusedBatchNormAct(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& residual,
                                const torch::Tensor& input_bias, Activation act, bool fork = false) {
  const bool tracks = bn.options.track_running_stats();
  const auto optional = [](const torch::Tensor& t) { return t.defined() ? std::optional(t) : std::nullopt; };
  return BatchNormActFunction::apply(x, bn.weight, bn.bias, optional(residual), optional(input_bias),
                                     tracks ? std::optional(bn.running_mean) : std::nullopt,
                                     tracks ? std::optional(bn.running_var) : std::nullopt,
                                     tracks ? std::optional(bn.num_batches_tracked) : std::nullopt, bn.options.eps(),
                                     *bn.options.momentum(), act == Activation::kRelu, fork);
}
#endif

}  // namespace

bool FusedBatchNormApplies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn,
                           const torch::Tensor& residual) {
#ifndef MGPU_HAS_FUSED_KERNELS
  (void)x, (void)bn, (void)residual;
  return false;
#else
  if (!FusedKernelsInUse() || !x.is_cuda() || x.dim() != 4 ||
      (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kFloat) || !IsAlignedChannelsLast(x) ||
      !kernels::FitsTheBatchNormKernels(x.size(0) * x.size(2) * x.size(3), x.size(1)) || !ParametersApply(x, bn)) {
    return false;
  }
  if (residual.defined() && (residual.sizes() != x.sizes() || residual.scalar_type() != x.scalar_type() ||
                             residual.device() != x.device() || !IsAlignedChannelsLast(residual))) {
    return false;
  }
  return DeviceRunsFusedKernels(x.device());
#endif
}

torch::Tensor BatchNormAct(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn, const torch::Tensor& residual,
                           Activation act) {
#ifdef MGPU_HAS_FUSED_KERNELS
  if (FusedBatchNormApplies(x, bn, residual)) return FusedBatchNormAct(x, bn, residual, torch::Tensor(), act)[0];
#endif
  return AtenBatchNormAct(x, bn, residual, act);
}

ForkedActivation BatchNormActForked(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn,
                                    const torch::Tensor& residual, Activation act) {
#ifdef MGPU_HAS_FUSED_KERNELS
  if (FusedBatchNormApplies(x, bn, residual)) {
    const variable_list y = FusedBatchNormAct(x, bn, residual, torch::Tensor(), act, /*fork=*/true);
    return {y[0], y[1]};
  }
#endif
  const torch::Tensor y = AtenBatchNormAct(x, bn, residual, act);
  return {y, y};
}

torch::Tensor ConvBatchNormAct(const torch::Tensor& x, torch::nn::Conv2dImpl& conv, torch::nn::BatchNorm2dImpl& bn,
                               Activation act) {
#ifdef MGPU_HAS_FUSED_KERNELS
  const auto& o = conv.options;
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  // Only where the kernels may apply (training, not evaluation): elsewhere the conv keeps its bias,
  // which cuDNN adds in the convolution, as before them.
  if (bn.is_training() && FusedKernelsInUse() && x.is_cuda() && DeviceRunsFusedKernels(x.device()) &&
      conv.bias.defined() && padding != nullptr && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode())) {
    const torch::Tensor unbiased = torch::conv2d(x, conv.weight, {}, *o.stride(), **padding, *o.dilation(), o.groups());
    if (FusedBatchNormApplies(unbiased, bn, {}) && IsFloatOn(conv.bias, x.device()) &&
        conv.bias.size(0) == unbiased.size(1)) {
      return FusedBatchNormAct(unbiased, bn, {}, conv.bias, act)[0];
    }
    // ATen's convolution adds its bias in the output's type (autocast's bfloat16, say).
    return BatchNormAct(unbiased + conv.bias.to(unbiased.scalar_type()).view({1, -1, 1, 1}), bn, {}, act);
  }
#endif
  return BatchNormAct(conv.forward(x), bn, {}, act);
}

}  // namespace mgpu
