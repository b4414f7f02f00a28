// models/kernels/batch_norm_math.h run on the CPU as the CUDA kernels run it on the GPU: block by
// block (a split of a tile), each block's phases in order with one thread, its shared lane sums in
// a vector; the finalizes channel by channel, SplitSums computing every lane of the warp. The same
// functions in the same order, so the same bits: the GPU tests compare the kernels with it
// exactly, the CPU tests check its arithmetic against ATen. The rows a pass keeps in flight change
// no bits; kHostRows is three, so that a lane's last rows fill some loads of a batch and not others.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "models/kernels/batch_norm_math.h"

namespace mgpu::testing {

struct HostBatchNorm {
  torch::Tensor y;                          // forward: (M, C) in x's type
  torch::Tensor mean, invstd;               // (C) float32, what the forward saves
  torch::Tensor running_mean, running_var;  // updated copies; undefined where none were given
  torch::Tensor gx, gresidual;              // backward: (M, C) in x's type; gresidual undefined without a residual
  torch::Tensor ggamma, gbeta;              // (C) float32
  int64_t batches_tracked = 0;              // the batches the finalize counted (num_batches_tracked's step)
};

namespace internal {

constexpr int kHostRows = 3;

template <typename T>
T* ElementsOf(const torch::Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// T: kernels::Bf16 or float, x's element as the kernels see it.
template <typename T>
void RunBatchNormOnHost(const torch::Tensor& x, const torch::Tensor& residual, const torch::Tensor& gamma,
                        const torch::Tensor& beta, const torch::Tensor& input_bias, double eps, double momentum,
                        bool relu, const torch::Tensor& gy, const torch::Tensor& gy2, HostBatchNorm& out) {
  namespace k = kernels;
  const k::BatchNormShape s = k::MakeBatchNormShape(x.size(0), static_cast<int>(x.size(1)));
  const T *xs = ElementsOf<T>(x), *rs = ElementsOf<T>(residual), *gys = ElementsOf<T>(gy);
  std::vector<float> partials(s.partial_floats()), lane_sums(2 * k::kBnRowLanes * k::kBnTileChannels);
  std::vector<float> scale(s.channels), shift(s.channels);
  out.mean = torch::empty({s.channels}), out.invstd = torch::empty({s.channels});
  k::BatchNormParameters p;
  p.gamma = gamma.data_ptr<float>(), p.beta = beta.data_ptr<float>(), p.input_bias = ElementsOf<float>(input_bias);
  p.running_mean = ElementsOf<float>(out.running_mean), p.running_var = ElementsOf<float>(out.running_var);
  p.batches_tracked = &out.batches_tracked;
  p.eps = static_cast<float>(eps), p.momentum = static_cast<float>(momentum);
  const k::BatchNormStatistics st{out.mean.data_ptr<float>(), out.invstd.data_ptr<float>(), scale.data(),
                                  shift.data()};
  for (int tile = 0; tile < s.tiles(); ++tile) {  // StatisticsKernel
    for (int split = 0; split < s.splits; ++split) {
      k::StatisticsLaneSums<kHostRows>(s, xs, split, tile, lane_sums.data(), 0, 1);
      k::StoreSplitPartials(s, split, tile, lane_sums.data(), partials.data(), 0, 1);
    }
  }
  for (int c = 0; c < s.channels; ++c) {  // FinalizeKernel
    float sums[2];
    k::SplitSums(s, partials.data(), c, sums);
    k::FinalizeChannel(s, p, c, k::ToFloat(xs[c]), sums, st);
  }
  out.y = torch::empty_like(x);
  T* y = ElementsOf<T>(out.y);
  for (int tile = 0; tile < s.tiles(); ++tile) {  // ApplyKernel
    for (int split = 0; split < s.splits; ++split) k::Apply<kHostRows>(s, xs, rs, st, relu, split, tile, y, 0, 1);
  }

  std::vector<float> coefficients(3 * s.channels);
  out.ggamma = torch::empty({s.channels}), out.gbeta = torch::empty({s.channels});
  const k::BatchNormGradients g{out.ggamma.data_ptr<float>(), out.gbeta.data_ptr<float>(), coefficients.data(),
                                coefficients.data() + s.channels, coefficients.data() + 2 * s.channels};
  k::GradientSource<T> source;  // as LaunchBatchNormBackward makes it
  source.gy = gys, source.gy2 = ElementsOf<T>(gy2), source.y = relu && rs != nullptr ? y : nullptr;
  if (residual.defined()) out.gresidual = torch::empty_like(x);
  T* gresidual = ElementsOf<T>(out.gresidual);
  for (int tile = 0; tile < s.tiles(); ++tile) {  // GradientSumsKernel
    for (int split = 0; split < s.splits; ++split) {
      k::GradientLaneSums<kHostRows>(s, xs, source, st, relu, split, tile, lane_sums.data(), gresidual, 0, 1);
      k::StoreSplitPartials(s, split, tile, lane_sums.data(), partials.data(), 0, 1);
    }
  }
  for (int c = 0; c < s.channels; ++c) {  // GradientFinalizeKernel
    float sums[2];
    k::SplitSums(s, partials.data(), c, sums);
    k::FinalizeGradientChannel(s, p.gamma, out.invstd.data_ptr<float>(), c, sums, g);
  }
  out.gx = torch::empty_like(x);
  // Where there is a residual, g read back as gy with no relu.
  const k::GradientSource<T> apply_source = gresidual != nullptr ? k::GradientSource<T>{gresidual} : source;
  const bool apply_relu = relu && gresidual == nullptr;
  for (int tile = 0; tile < s.tiles(); ++tile) {  // GradientApplyKernel
    for (int split = 0; split < s.splits; ++split) {
      k::GradientApply<kHostRows>(s, xs, apply_source, st, g, apply_relu, split, tile, ElementsOf<T>(out.gx), 0, 1);
    }
  }
}

}  // namespace internal

// The forward and the backward of y = act(bn(x [+ input_bias]) [+ residual]) in training mode,
// y's gradient gy (+ gy2, a second consumer's, undefined for none). x, gy, gy2 and the residual
// (undefined for none) are contiguous (M, C) CPU tensors, all float32 or all bfloat16, with a
// shape FitsTheBatchNormKernels; gamma, beta, the running statistics (both undefined for none)
// and the input bias (undefined for none) float32 of C. The running statistics given are left as
// they are.
inline HostBatchNorm RunBatchNormOnHost(const torch::Tensor& x, const torch::Tensor& residual,
                                        const torch::Tensor& gamma, const torch::Tensor& beta,
                                        const torch::Tensor& running_mean, const torch::Tensor& running_var, double eps,
                                        double momentum, bool relu, const torch::Tensor& gy,
                                        const torch::Tensor& input_bias = {}, const torch::Tensor& gy2 = {}) {
  const auto like_x = [&](const torch::Tensor& t) {
    return t.sizes() == x.sizes() && t.is_contiguous() && t.scalar_type() == x.scalar_type();
  };
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && like_x(gy) && (!gy2.defined() || like_x(gy2)));
  TORCH_CHECK(kernels::FitsTheBatchNormKernels(x.size(0), x.size(1)));
  TORCH_CHECK(!residual.defined() || (residual.sizes() == x.sizes() && residual.is_contiguous() &&
                                      residual.scalar_type() == x.scalar_type()));
  for (const torch::Tensor& t : {gamma, beta, running_mean, running_var, input_bias}) {
    TORCH_CHECK(!t.defined() || (t.dim() == 1 && t.size(0) == x.size(1) && t.scalar_type() == torch::kFloat));
  }
  TORCH_CHECK(gamma.defined() && beta.defined() && running_mean.defined() == running_var.defined());
  HostBatchNorm out;
  if (running_mean.defined()) out.running_mean = running_mean.clone(), out.running_var = running_var.clone();
  if (x.scalar_type() == torch::kBFloat16) {
    internal::RunBatchNormOnHost<kernels::Bf16>(x, residual, gamma, beta, input_bias, eps, momentum, relu, gy, gy2,
                                                out);
  } else {
    TORCH_CHECK(x.scalar_type() == torch::kFloat);
    internal::RunBatchNormOnHost<float>(x, residual, gamma, beta, input_bias, eps, momentum, relu, gy, gy2, out);
  }
  return out;
}

}  // namespace mgpu::testing
