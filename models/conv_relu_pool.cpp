#include "models/conv_relu_pool.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <variant>

#include <fmt/format.h>

#include "common/status.h"
#include "models/fused_kernels.h"

#ifdef MGPU_HAS_FUSED_KERNELS
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "models/kernels/conv_relu_pool_kernels.h"
#endif

namespace mgpu {
namespace {

// The padding P of a square-filter, stride-1, dilation-1, one-group, zero-padded convolution with
// the same padding on both axes, or nothing.
std::optional<int64_t> PaddingOfASimpleConvolution(const torch::nn::detail::ConvNdOptions<2>& o) {
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  const auto kernel = *o.kernel_size(), stride = *o.stride(), dilation = *o.dilation();
  if (padding == nullptr || (**padding)[0] != (**padding)[1] || kernel[0] != kernel[1] || o.groups() != 1 ||
      stride[0] != 1 || stride[1] != 1 || dilation[0] != 1 || dilation[1] != 1 ||
      !std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode())) {
    return std::nullopt;
  }
  return (**padding)[0];
}

#ifdef MGPU_HAS_FUSED_KERNELS
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::ConvReluPoolShape ShapeOf(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding) {
  return kernels::MakeConvReluPoolShape(x.size(0), x.size(1), x.size(2), x.size(3), weight.size(0), weight.size(2),
                                        padding);
}

class ConvReluPoolFunction : public torch::autograd::Function<ConvReluPoolFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, int64_t padding) {
    const c10::cuda::CUDAGuard on_device(x.device());
    const auto s = ShapeOf(x, weight, padding);
    const torch::Tensor w = weight.contiguous(), b = bias.contiguous();
    torch::Tensor y = torch::empty({s.batch, s.out_channels, s.pooled_height, s.pooled_width}, x.options());
    torch::Tensor window = torch::empty_like(y, y.options().dtype(torch::kUInt8));
    C10_CUDA_CHECK(kernels::LaunchConvReluPoolForward(s, x.data_ptr<float>(), w.data_ptr<float>(),
                                                      b.data_ptr<float>(), y.data_ptr<float>(),
                                                      window.data_ptr<uint8_t>(), at::cuda::getCurrentCUDAStream()));
    ctx->save_for_backward({x, w, y});
    ctx->saved_data["window"] = window;
    ctx->saved_data["padding"] = padding;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &y = saved[2];
    const torch::Tensor window = ctx->saved_data["window"].toTensor();
    const torch::Tensor gy = grads[0].contiguous();
    const c10::cuda::CUDAGuard on_device(x.device());
    const auto s = ShapeOf(x, w, ctx->saved_data["padding"].toInt());
    torch::Tensor gx = ctx->needs_input_grad(0) ? torch::empty_like(x) : torch::Tensor();
    torch::Tensor partial = torch::empty({s.batch, s.out_channels, s.terms()}, x.options());
    torch::Tensor padded = gx.defined() ? torch::empty({s.batch, s.gpad_floats()}, x.options()) : gx;
    torch::Tensor gw = torch::empty_like(w), gb = torch::empty({s.out_channels}, x.options());
    C10_CUDA_CHECK(kernels::LaunchConvReluPoolBackward(
        s, x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), window.data_ptr<uint8_t>(),
        gy.data_ptr<float>(), gx.defined() ? gx.data_ptr<float>() : nullptr, partial.data_ptr<float>(),
        padded.defined() ? padded.data_ptr<float>() : nullptr, gw.data_ptr<float>(), gb.data_ptr<float>(),
        at::cuda::getCurrentCUDAStream()));
    return {gx, gw, gb, torch::Tensor()};
  }
};

// Whether the kernels take x and weight: sizes within the shape's ints (a grid of batch x channels
// blocks included), and kernels::FitsTheKernels.
bool KernelsTakeTheShape(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding) {
  constexpr int64_t kMaxSize = 1 << 16;
  constexpr int64_t kMaxBlocks = std::numeric_limits<int>::max();
  for (const int64_t size : {x.size(1), x.size(2), x.size(3), weight.size(0), weight.size(2), padding}) {
    if (size >= kMaxSize) return false;
  }
  return x.size(0) * std::max(x.size(1), weight.size(0)) < kMaxBlocks &&
         kernels::FitsTheKernels(ShapeOf(x, weight, padding));
}
#endif

}  // namespace

bool FusedConvReluPoolApplies(const torch::Tensor& x, const torch::nn::Conv2dImpl& conv) {
#ifndef MGPU_HAS_FUSED_KERNELS
  (void)x, (void)conv;
  return false;
#else
  const auto padding = PaddingOfASimpleConvolution(conv.options);
  if (!FusedKernelsInUse() || !padding || !conv.bias.defined() || !x.is_cuda() || x.dim() != 4 ||
      x.scalar_type() != torch::kFloat || conv.weight.scalar_type() != torch::kFloat ||
      conv.bias.scalar_type() != torch::kFloat || !x.is_contiguous() || at::autocast::is_autocast_enabled(at::kCUDA)) {
    return false;
  }
  // Parameters elsewhere than x, or channels that do not match, are ATen's to report.
  return conv.weight.device() == x.device() && conv.bias.device() == x.device() &&
         x.size(1) == conv.weight.size(1) && KernelsTakeTheShape(x, conv.weight, *padding) &&
         DeviceRunsFusedKernels(x.device());
#endif
}

torch::Tensor ConvReluPool(const torch::Tensor& x, const torch::nn::Conv2dImpl& conv) {
#ifndef MGPU_HAS_FUSED_KERNELS
  (void)x, (void)conv;
  throw Error(ExitCode::kFailure, "ConvReluPool: this mgpu was built without its CUDA kernels");
#else
  if (!FusedConvReluPoolApplies(x, conv)) {
    throw Error(ExitCode::kFailure, fmt::format("ConvReluPool does not apply to a {} {} input of {}",
                                                c10::str(x.sizes()), c10::toString(x.scalar_type()),
                                                x.device().str()));
  }
  return ConvReluPoolFunction::apply(x, conv.weight, conv.bias, *PaddingOfASimpleConvolution(conv.options));
#endif
}

}  // namespace mgpu
