#include "models/linear_relu_chain.h"

#include <fmt/format.h>

#include "common/status.h"
#include "models/fused_kernels.h"

#ifdef MGPU_HAS_FUSED_KERNELS
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "models/kernels/linear_chain_kernels.h"
#endif

namespace mgpu {
namespace {

#ifdef MGPU_HAS_FUSED_KERNELS
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The shape of x (N, F_0) through weights W_l (F_{l+1}, F_l); sizes that fit int (checked by the caller).
kernels::LinearChainShape ShapeOf(const torch::Tensor& x, const std::vector<torch::Tensor>& weights) {
  kernels::LinearChainShape s;
  s.batch = static_cast<int>(x.size(0));
  s.layers = static_cast<int>(weights.size());
  s.features[0] = static_cast<int>(x.size(1));
  for (int l = 0; l < s.layers; ++l) s.features[l + 1] = static_cast<int>(weights[l].size(0));
  return s;
}

// The parameters (W_0, b_0, W_1, b_1, ...), contiguous, as the kernels take them.
struct ChainParameters {
  std::vector<torch::Tensor> weights, biases;
  kernels::LinearChainParameters pointers;
};

ChainParameters Contiguous(torch::TensorList parameters) {
  ChainParameters p;
  for (size_t l = 0; l < parameters.size() / 2; ++l) {
    p.weights.push_back(parameters[2 * l].contiguous());
    p.biases.push_back(parameters[2 * l + 1].contiguous());
    p.pointers.weight[l] = p.weights.back().data_ptr<float>();
    p.pointers.bias[l] = p.biases.back().data_ptr<float>();
  }
  return p;
}

class LinearReluChainFunction : public torch::autograd::Function<LinearReluChainFunction> {
 public:
  // parameters: (W_0, b_0, W_1, b_1, ...).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, torch::TensorList parameters) {
    const c10::cuda::CUDAGuard on_device(x.device());
    const ChainParameters p = Contiguous(parameters);
    const auto s = ShapeOf(x, p.weights);
    torch::Tensor y = torch::empty({s.batch, s.features[s.layers]}, x.options());
    torch::Tensor hidden = torch::empty({int64_t{s.batch} * s.hidden_features()}, x.options());
    C10_CUDA_CHECK(kernels::LaunchLinearChainForward(s, x.data_ptr<float>(), p.pointers, y.data_ptr<float>(),
                                                     hidden.data_ptr<float>(), at::cuda::getCurrentCUDAStream()));
    std::vector<torch::Tensor> saved = {x, hidden};
    for (int l = 0; l < s.layers; ++l) saved.insert(saved.end(), {p.weights[l], p.biases[l]});
    ctx->save_for_backward(saved);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &hidden = saved[1];
    const ChainParameters p = Contiguous(torch::TensorList(saved).slice(2));
    const torch::Tensor gy = grads[0].contiguous();
    const c10::cuda::CUDAGuard on_device(x.device());
    const auto s = ShapeOf(x, p.weights);
    torch::Tensor gx = ctx->needs_input_grad(0) ? torch::empty_like(x) : torch::Tensor();
    torch::Tensor ghidden = torch::empty_like(hidden);
    variable_list result = {gx};
    kernels::LinearChainGradients g;
    for (int l = 0; l < s.layers; ++l) {
      result.push_back(torch::empty_like(p.weights[l]));
      result.push_back(torch::empty_like(p.biases[l]));
      g.weight[l] = result[result.size() - 2].data_ptr<float>();
      g.bias[l] = result.back().data_ptr<float>();
    }
    C10_CUDA_CHECK(kernels::LaunchLinearChainBackward(s, x.data_ptr<float>(), p.pointers, hidden.data_ptr<float>(),
                                                      gy.data_ptr<float>(), ghidden.data_ptr<float>(),
                                                      gx.defined() ? gx.data_ptr<float>() : nullptr, g,
                                                      at::cuda::getCurrentCUDAStream()));
    return result;
  }
};

bool IsFloat32On(const torch::Tensor& t, const torch::Device& device) {
  return t.defined() && t.scalar_type() == torch::kFloat && t.device() == device;
}

// Whether every layer is a float32 one with a bias on x's device taking the previous layer's
// features, and the kernels take the sizes.
bool KernelsTakeTheLayers(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers) {
  constexpr int64_t kMaxSize = int64_t{1} << 30;
  if (layers.empty() || layers.size() > kernels::kMaxChainLayers || x.size(0) >= kMaxSize) return false;
  std::vector<torch::Tensor> weights;
  int64_t features = x.size(1);
  for (const auto& layer : layers) {
    const torch::Tensor &w = layer->weight, &b = layer->bias;
    if (!IsFloat32On(w, x.device()) || !IsFloat32On(b, x.device()) || w.dim() != 2 || w.size(1) != features ||
        features >= kMaxSize) {
      return false;
    }
    weights.push_back(w);
    features = w.size(0);
  }
  return features < kMaxSize && kernels::FitsTheKernels(ShapeOf(x, weights));
}
#endif

}  // namespace

bool FusedLinearReluChainApplies(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers) {
#ifndef MGPU_HAS_FUSED_KERNELS
  (void)x, (void)layers;
  return false;
#else
  if (!FusedKernelsInUse() || !x.is_cuda() || x.dim() != 2 || x.scalar_type() != torch::kFloat ||
      !x.is_contiguous() || at::autocast::is_autocast_enabled(at::kCUDA)) {
    return false;
  }
  return KernelsTakeTheLayers(x, layers) && DeviceRunsFusedKernels(x.device());
#endif
}

torch::Tensor LinearReluChain(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers) {
#ifndef MGPU_HAS_FUSED_KERNELS
  (void)x, (void)layers;
  throw Error(ExitCode::kFailure, "LinearReluChain: this mgpu was built without its CUDA kernels");
#else
  if (!FusedLinearReluChainApplies(x, layers)) {
    throw Error(ExitCode::kFailure, fmt::format("LinearReluChain does not apply to a {} {} input of {}",
                                                c10::str(x.sizes()), c10::toString(x.scalar_type()),
                                                x.device().str()));
  }
  std::vector<torch::Tensor> parameters;
  for (const auto& layer : layers) parameters.insert(parameters.end(), {layer->weight, layer->bias});
  return LinearReluChainFunction::apply(x, torch::TensorList(parameters));
#endif
}

}  // namespace mgpu
