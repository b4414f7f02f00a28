#include "models/channel_bias.h"

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The bias gradient: grad (N, C, H, W) summed over N, H and W, in float32, as `bias_dtype`.
torch::Tensor BiasGradient(const torch::Tensor& grad, torch::ScalarType bias_dtype) {
  if (!grad.is_contiguous()) return grad.sum({0, 2, 3}, /*keepdim=*/false, torch::kFloat).to(bias_dtype);
  const int64_t n = grad.size(0), c = grad.size(1);
  return grad.view({n, c, -1}).sum(2, /*keepdim=*/false, torch::kFloat).sum(0).to(bias_dtype);  // (N, C) -> (C)
}

class ChannelBias : public torch::autograd::Function<ChannelBias> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& bias) {
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return x + bias.to(x.scalar_type()).view({1, -1, 1, 1});
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto bias_dtype = static_cast<torch::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    return {grads[0], BiasGradient(grads[0], bias_dtype)};
  }
};

}  // namespace

torch::Tensor AddChannelBias(const torch::Tensor& x, const torch::Tensor& bias) {
  if (x.dim() != 4 || bias.dim() != 1 || bias.size(0) != x.size(1)) {
    throw Error(ExitCode::kFailure, fmt::format("AddChannelBias takes a (N, C, H, W) tensor and a (C) bias, not {} and {}",
                                                c10::str(x.sizes()), c10::str(bias.sizes())));
  }
  return ChannelBias::apply(x, bias);
}

}  // namespace mgpu
