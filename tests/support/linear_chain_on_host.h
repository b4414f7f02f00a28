// models/kernels/linear_chain_math.h run on the CPU as the CUDA kernels run it on the GPU: block by
// block, each block's phases in order with one thread (one warp, whose lanes WarpDots computes),
// its shared buffer in a vector. The same functions in the same order, so the same bits: the GPU
// tests compare the kernels with it exactly, the CPU tests check its arithmetic against ATen.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "models/kernels/linear_chain_math.h"

namespace mgpu::testing {

struct HostLinearChain {
  torch::Tensor y;                    // forward: (N, F_M)
  torch::Tensor gx;                   // backward
  std::vector<torch::Tensor> gw, gb;  // per layer
};

// x (N, F_0), weights[l] (F_{l+1}, F_l), biases[l] (F_{l+1}), gy (N, F_M): contiguous float32 CPU tensors.
inline HostLinearChain RunLinearChainOnHost(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                                            const std::vector<torch::Tensor>& biases, const torch::Tensor& gy) {
  namespace k = kernels;
  k::LinearChainShape s;
  s.batch = x.size(0), s.layers = static_cast<int>(weights.size()), s.features[0] = x.size(1);
  k::LinearChainParameters p;
  HostLinearChain out;
  k::LinearChainGradients g;
  for (int l = 0; l < s.layers; ++l) {
    s.features[l + 1] = weights[l].size(0);
    p.weight[l] = weights[l].data_ptr<float>(), p.bias[l] = biases[l].data_ptr<float>();
    out.gw.push_back(torch::empty_like(weights[l])), out.gb.push_back(torch::empty_like(biases[l]));
    g.weight[l] = out.gw.back().data_ptr<float>(), g.bias[l] = out.gb.back().data_ptr<float>();
  }
  out.y = torch::empty({s.batch, s.features[s.layers]});
  std::vector<float> hidden(size_t(s.batch) * s.hidden_features()), ghidden(hidden.size());
  std::vector<float> shared(k::kMaxSharedFloats);
  for (int n = 0; n < s.batch; ++n) {  // ChainForwardKernel
    k::LoadFloats(x.data_ptr<float>() + n * s.in_features(0), s.in_features(0), shared.data(), 0, 1);
    for (int l = 0; l < s.layers; ++l) {
      k::LayerForward(s, p, l, shared.data() + s.vector_offset(l), shared.data() + s.vector_offset(l + 1), 0, 1);
    }
    k::StoreForwardOutputs(s, shared.data(), n, out.y.data_ptr<float>(), hidden.data(), 0, 1);
  }
  out.gx = torch::empty_like(x);
  const int last = s.layers - 1;
  for (int n = 0; n < s.batch; ++n) {  // ChainInputGradientKernel
    float *gradients = shared.data(), *sums = gradients + s.forward_shared_floats();
    k::LoadFloats(gy.data_ptr<float>() + n * s.out_features(last), s.out_features(last),
                  gradients + s.vector_offset(s.layers), 0, 1);
    for (int l = last; l >= 0; --l) {
      k::SumInputGradientParts(s, p, l, gradients + s.vector_offset(l + 1), sums, 0, 1);
      k::AddInputGradientParts(s, l, sums, hidden.data(), n, gradients + s.vector_offset(l),
                               l == 0 ? out.gx.data_ptr<float>() : ghidden.data(), 0, 1);
    }
  }
  float *gout_chunk = shared.data(), *in_chunk = gout_chunk + k::kTileSamples * k::kTileOutputs;
  float* sums = in_chunk + k::kTileSamples * k::kTileColumns;
  for (int l = 0; l < s.layers; ++l) {  // ChainParameterGradientKernel
    for (int tile = 0; tile < k::ParameterTiles(s, l); ++tile) {
      for (int first = 0; first < s.batch; first += k::kTileSamples) {
        k::LoadParameterTileChunk(s, l, tile, first, x.data_ptr<float>(), hidden.data(), gy.data_ptr<float>(),
                                  ghidden.data(), gout_chunk, in_chunk, 0, 1);
        k::AccumulateParameterTileChunk(gout_chunk, in_chunk, first == 0, sums, 0, 1);
      }
      k::StoreParameterTile(s, l, tile, sums, g, 0, 1);
    }
  }
  return out;
}

}  // namespace mgpu::testing
