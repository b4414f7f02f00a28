// models/kernels/conv_relu_pool_math.h run on the CPU as the CUDA kernels run it on the GPU: block
// by block, each block's phases in order with one thread, its shared buffers in a vector. The same
// functions in the same order, so the same bits: the GPU tests compare the kernels with it exactly,
// the CPU tests check its arithmetic against ATen.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "models/kernels/conv_relu_pool_math.h"

namespace mgpu::testing {

struct HostConvReluPool {
  torch::Tensor y, window;   // forward: (N, K, PH, PW) float32 and uint8
  torch::Tensor gx, gw, gb;  // backward
};

// x (N, C, H, W), w (K, C, R, R), b (K), gy (N, K, PH, PW): contiguous float32 CPU tensors.
// kKernel: R, or 0 for the kernels' any-size path.
template <int kKernel>
HostConvReluPool RunConvReluPoolOnHost(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                       int padding, const torch::Tensor& gy) {
  namespace k = kernels;
  const auto s = k::MakeConvReluPoolShape(x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), padding);
  HostConvReluPool out;
  out.y = torch::empty({s.batch, s.out_channels, s.pooled_height, s.pooled_width});
  out.window = torch::empty(out.y.sizes(), torch::kUInt8);
  const float *xs = x.data_ptr<float>(), *ws = w.data_ptr<float>(), *g = gy.data_ptr<float>();
  float* y = out.y.data_ptr<float>();
  uint8_t* window = out.window.data_ptr<uint8_t>();
  std::vector<float> shared(k::kMaxSharedFloats);
  for (int n = 0; n < s.batch; ++n) {  // ForwardKernel
    for (int f = 0; f < s.out_channels; ++f) {
      float *xpad = shared.data(), *filter = xpad + s.xpad_floats(), *conv = filter + s.filter_floats();
      k::LoadPaddedInput(s, xs, n, xpad, 0, 1);
      k::LoadFloats(ws + int64_t{f} * s.filter_floats(), s.filter_floats(), filter, 0, 1);
      k::ConvolveCovered<kKernel>(s, xpad, filter, conv, 0, 1);
      k::PoolRelu(s, conv, b.data_ptr<float>()[f], n, f, y, window, 0, 1);
    }
  }
  torch::Tensor partial = torch::empty({s.batch, s.out_channels, s.terms()});
  torch::Tensor padded = torch::empty({s.batch, s.gpad_floats()});
  for (int n = 0; n < s.batch; ++n) {  // WeightGradientKernel
    for (int f = 0; f < s.out_channels; ++f) {
      float *xpad = shared.data(), *gconv = xpad + s.xpad_floats(), *sums = gconv + s.covered();
      k::LoadPaddedInput(s, xs, n, xpad, 0, 1);
      k::GatherConvGradient(s, g, y, window, n, f, gconv, 0, 1);
      k::WritePaddedConvGradient(s, gconv, n, f, padded.data_ptr<float>(), 0, 1);
      k::SumTermsByGroup<kKernel>(s, xpad, gconv, sums, 0, 1);
      k::AddGroups(s, sums, n, f, partial.data_ptr<float>(), 0, 1);
    }
  }
  out.gw = torch::empty_like(w);
  out.gb = torch::empty_like(b);
  const int weights = s.terms() - 1;
  for (int f = 0; f < s.out_channels; ++f) {  // SumOverBatchKernel
    for (int j = 0; j < weights; ++j) {
      out.gw.data_ptr<float>()[f * weights + j] = k::SumOverBatchAt(s, partial.data_ptr<float>(), f, j);
    }
    out.gb.data_ptr<float>()[f] = k::SumOverBatchAt(s, partial.data_ptr<float>(), f, weights);
  }
  out.gx = torch::empty_like(x);
  for (int n = 0; n < s.batch; ++n) {  // InputGradientKernel
    for (int c = 0; c < s.in_channels; ++c) {
      float *gpad = shared.data(), *filters = gpad + s.gpad_floats();
      k::LoadFloats(padded.data_ptr<float>() + int64_t{n} * s.gpad_floats(), s.gpad_floats(), gpad, 0, 1);
      k::LoadChannelFilters(s, ws, c, filters, 0, 1);
      k::InputGradient<kKernel>(s, gpad, filters, n, c, out.gx.data_ptr<float>(), 0, 1);
    }
  }
  return out;
}

}  // namespace mgpu::testing
