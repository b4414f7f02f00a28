// Reading the model_state_dict.pt files runs wrote, to compare them (header only: the suites that
// use it link LibTorch through mgpu_worker, which the support library does not).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include "tests/support/test_support.h"

namespace mgpu::testing {

// The tensors of the model_state_dict.pt at `path`, in its order (the model's).
inline std::vector<torch::Tensor> SavedLeNetParameters(const std::string& path) {
  const std::string bytes = ReadText(path);
  const c10::IValue state = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  std::vector<torch::Tensor> tensors;
  for (const auto& entry : state.toGenericDict()) tensors.push_back(entry.value().toTensor());
  return tensors;
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
