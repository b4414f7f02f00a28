#include "models/global_average_pool.h"

namespace mgpu {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class GlobalAveragePoolFunction : public torch::autograd::Function<GlobalAveragePoolFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x) {
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["channels_last"] = x.suggest_memory_format() == torch::MemoryFormat::ChannelsLast;
    return x.mean({-1, -2});  // ATen's adaptive_avg_pool2d to 1 x 1 is this mean (with keepdim)
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();  // B, C, H, W
    const bool channels_last = ctx->saved_data["channels_last"].toBool();
    // ATen's mean backward: the gradient over H W pixels, divided by the same Scalar (per element,
    // so dividing before the broadcast gives the same bits as after it).
    const torch::Tensor scaled = grads[0].div(sizes[2] * sizes[3]).reshape({sizes[0], sizes[1], 1, 1});  // (B, C, 1, 1)
    const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
    torch::Tensor gx = torch::empty(sizes, scaled.options().memory_format(format));
    gx.copy_(scaled.expand(sizes));  // (B, C, H, W), written in gx's order
    return {gx};
  }
};

}  // namespace

torch::Tensor GlobalAveragePool(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 4, "GlobalAveragePool takes (B, C, H, W), got ", x.sizes());
  return GlobalAveragePoolFunction::apply(x);
}

}  // namespace mgpu
