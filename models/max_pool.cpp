#include "models/max_pool.h"

#include "models/fused_kernels.h"

#ifdef MGPU_HAS_FUSED_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "models/kernels/max_pool_kernels.h"
#endif

namespace mgpu {
namespace {

#ifdef MGPU_HAS_FUSED_KERNELS
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// pool's (kernel h, w, stride h, w, padding h, w).
std::vector<int64_t> WindowOf(const torch::nn::MaxPool2dOptions& o) {
  return {(*o.kernel_size())[0], (*o.kernel_size())[1], (*o.stride())[0], (*o.stride())[1], (*o.padding())[0],
          (*o.padding())[1]};
}

// The kernels' shape of x (its sizes) pooled in `window`; a zero shape, which FitsTheMaxPoolKernels
// refuses, where a size is out of the kernels' range.
kernels::MaxPoolShape ShapeOf(c10::IntArrayRef x_sizes, const std::vector<int64_t>& window) {
  const auto in_range = [](int64_t v, int64_t most) { return v >= 0 && v <= most; };
  for (const int64_t size : x_sizes) {
    if (!in_range(size, INT32_MAX)) return {};
  }
  if (!in_range(window[0], 256) || !in_range(window[1], 256) || window[2] < 1 || window[3] < 1 ||
      !in_range(window[2], INT32_MAX) || !in_range(window[3], INT32_MAX) || !in_range(window[4], 128) ||
      !in_range(window[5], 128)) {
    return {};
  }
  kernels::MaxPoolShape s;
  s.batch = static_cast<int>(x_sizes[0]), s.channels = static_cast<int>(x_sizes[1]);
  s.height = static_cast<int>(x_sizes[2]), s.width = static_cast<int>(x_sizes[3]);
  s.kernel_h = static_cast<int>(window[0]), s.kernel_w = static_cast<int>(window[1]);
  s.stride_h = static_cast<int>(window[2]), s.stride_w = static_cast<int>(window[3]);
  s.pad_h = static_cast<int>(window[4]), s.pad_w = static_cast<int>(window[5]);
  s.pooled_height = kernels::MaxPoolOutputSide(s.height, s.kernel_h, s.stride_h, s.pad_h);
  s.pooled_width = kernels::MaxPoolOutputSide(s.width, s.kernel_w, s.stride_w, s.pad_w);
  return s;
}

template <typename T>
T* Elements(const torch::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

// t's elements, or null where t is undefined.
template <typename T>
const T* OrNull(const torch::Tensor& t) {
  return t.defined() ? Elements<const T>(t) : nullptr;
}

class MaxPoolFunction : public torch::autograd::Function<MaxPoolFunction> {
 public:
  // window: WindowOf(pool.options), which the backward needs again. Returns y, and with `fork` a
  // second tensor of y's storage (ForkedActivation) whose gradient arrives separately.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, std::vector<int64_t> window, bool fork) {
    const kernels::MaxPoolShape s = ShapeOf(x.sizes(), window);
    const c10::cuda::CUDAGuard on_device(x.device());
    torch::Tensor y = torch::empty({s.batch, s.channels, s.pooled_height, s.pooled_width},
                                   x.options().memory_format(torch::MemoryFormat::ChannelsLast));
    torch::Tensor window_index = torch::empty({s.forward_items() * kernels::kVector}, x.options().dtype(torch::kByte));
    const auto stream = at::cuda::getCurrentCUDAStream();
    C10_CUDA_CHECK(x.scalar_type() == torch::kBFloat16
                       ? kernels::LaunchMaxPoolForward(s, Elements<const kernels::Bf16>(x), Elements<kernels::Bf16>(y),
                                                       window_index.data_ptr<uint8_t>(), stream)
                       : kernels::LaunchMaxPoolForward(s, Elements<const float>(x), Elements<float>(y),
                                                       window_index.data_ptr<uint8_t>(), stream));
    ctx->save_for_backward({window_index});
    ctx->saved_data["window"] = window;
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    // An unused output's gradient stays undefined instead of a tensor of zeros to read.
    ctx->set_materialize_grads(false);
    if (!fork) return {y};
    return {y, y.alias()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor window_index = ctx->get_saved_variables()[0];
    const auto x_sizes = ctx->saved_data["x_sizes"].toIntVector();
    const kernels::MaxPoolShape s = ShapeOf(x_sizes, ctx->saved_data["window"].toIntVector());
    torch::Tensor gy = AlignedChannelsLast(grads[0]);
    torch::Tensor gy2 = grads.size() > 1 ? AlignedChannelsLast(grads[1]) : torch::Tensor();
    if (!gy.defined()) std::swap(gy, gy2);
    if (!gy.defined()) return {torch::Tensor(), {}, {}};  // no output was used
    const c10::cuda::CUDAGuard on_device(gy.device());
    torch::Tensor gx = torch::empty(x_sizes, gy.options().memory_format(torch::MemoryFormat::ChannelsLast));
    const auto stream = at::cuda::getCurrentCUDAStream();
    C10_CUDA_CHECK(gy.scalar_type() == torch::kBFloat16
                       ? kernels::LaunchMaxPoolBackward(s, Elements<const kernels::Bf16>(gy), OrNull<kernels::Bf16>(gy2),
                                                        window_index.data_ptr<uint8_t>(), Elements<kernels::Bf16>(gx),
                                                        stream)
                       : kernels::LaunchMaxPoolBackward(s, Elements<const float>(gy), OrNull<float>(gy2),
                                                        window_index.data_ptr<uint8_t>(), Elements<float>(gx), stream));
    return {gx, {}, {}};
  }
};
#endif

}  // namespace

bool FusedMaxPoolApplies(const torch::Tensor& x, const torch::nn::MaxPool2dImpl& pool) {
#ifndef MGPU_HAS_FUSED_KERNELS
  (void)x, (void)pool;
  return false;
#else
  const auto& o = pool.options;
  if (!FusedKernelsInUse() || !x.is_cuda() || x.dim() != 4 ||
      (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kFloat) || !IsAlignedChannelsLast(x) ||
      o.ceil_mode() || (*o.dilation())[0] != 1 || (*o.dilation())[1] != 1 ||
      !kernels::FitsTheMaxPoolKernels(ShapeOf(x.sizes(), WindowOf(o)))) {
    return false;
  }
  return DeviceRunsFusedKernels(x.device());
#endif
}

torch::Tensor MaxPool(const torch::Tensor& x, torch::nn::MaxPool2dImpl& pool) {
#ifdef MGPU_HAS_FUSED_KERNELS
  if (FusedMaxPoolApplies(x, pool)) {
    return MaxPoolFunction::apply(x, WindowOf(pool.options), /*fork=*/false)[0];
  }
#endif
  return pool.forward(x);
}

ForkedActivation MaxPoolForked(const torch::Tensor& x, torch::nn::MaxPool2dImpl& pool) {
#ifdef MGPU_HAS_FUSED_KERNELS
  if (FusedMaxPoolApplies(x, pool)) {
    const variable_list y = MaxPoolFunction::apply(x, WindowOf(pool.options), /*fork=*/true);
    return {y[0], y[1]};
  }
#endif
  const torch::Tensor y = pool.forward(x);
  return {y, y};
}

}  // namespace mgpu
