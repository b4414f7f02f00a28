// Reading the model.pt files runs wrote, to compare them (header only: the suites that use it
// link the model library through mgpu_worker, which the support library does not).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "models/model_factory.h"

namespace mgpu::testing {

// The parameters of a LeNet saved at `path`, in the model's order.
inline std::vector<torch::Tensor> SavedLeNetParameters(const std::string& path) {
  auto model = MakeModel("lenet", ModelShape{});
  torch::load(model, path);
  return model->parameters();
}

// The largest ||a - b||_inf / ||b||_inf over the parameter tensors of two saved LeNets.
inline double MaxRelativeDifference(const std::string& a_path, const std::string& b_path) {
  const std::vector<torch::Tensor> a = SavedLeNetParameters(a_path), b = SavedLeNetParameters(b_path);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / b[i].abs().max().item<double>());
  }
  return worst;
}

}  // namespace mgpu::testing
