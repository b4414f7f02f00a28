// Comparing the model.pt files two runs wrote (header only: the suites that use it link the
// model library through mgpu_worker, which the support library does not).
#pragma once

#include <algorithm>
#include <string>

#include <torch/torch.h>

#include "models/model_factory.h"

namespace mgpu::testing {

// The largest ||a - b||_inf / ||b||_inf over the parameter tensors of two saved LeNets.
inline double MaxRelativeDifference(const std::string& a_path, const std::string& b_path) {
  auto a = MakeModel("lenet", ModelShape{}), b = MakeModel("lenet", ModelShape{});
  torch::load(a, a_path);
  torch::load(b, b_path);
  double worst = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>() / pb[i].abs().max().item<double>());
  }
  return worst;
}

}  // namespace mgpu::testing
