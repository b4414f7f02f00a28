#include "worker/state_dict_export.h"

#include <unordered_map>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// A fresh, compact CPU copy: a parameter may be a view of a larger buffer (DDP's buckets, dp's
// flat state), whose whole storage torch.save would otherwise write with it.
torch::Tensor Exported(const torch::Tensor& tensor) {
  torch::Tensor out = tensor.detach().to(torch::kCPU);
  if (out.is_floating_point()) out = out.to(torch::kFloat);
  return out.clone(at::MemoryFormat::Contiguous);
}

}  // namespace

std::string SerializeStateDict(torch::nn::Module& model, const std::vector<torch::Tensor>& stepped) {
  const std::vector<torch::Tensor> parameters = model.parameters();
  if (parameters.size() != stepped.size()) {
    throw Error(ExitCode::kFailure, fmt::format("state dict: the optimizer steps {} tensors, the model has {} "
                                                "parameters", stepped.size(), parameters.size()));
  }
  std::unordered_map<const c10::TensorImpl*, torch::Tensor> master_of;
  for (size_t i = 0; i < parameters.size(); ++i) master_of.emplace(parameters[i].unsafeGetTensorImpl(), stepped[i]);

  torch::NoGradGuard no_grad;
  c10::Dict<std::string, torch::Tensor> state;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      state.insert(prefix + p.key(), Exported(master_of.at(p.value().unsafeGetTensorImpl())));
    }
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) state.insert(prefix + b.key(), Exported(b.value()));
  }
  const std::vector<char> pickled = torch::pickle_save(state);
  return std::string(pickled.begin(), pickled.end());
}

}  // namespace mgpu
