#include "worker/state_dict_export.h"

#include <unordered_map>

#include <fmt/format.h>

#include "common/status.h"
#include "worker/torch_archive.h"

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
  auto add_module = [&](const std::string& prefix, const torch::nn::Module& module) {
    for (const auto& p : module.named_parameters(/*recurse=*/false)) {
      state.insert(prefix + p.key(), Exported(master_of.at(p.value().unsafeGetTensorImpl())));
    }
    for (const auto& b : module.named_buffers(/*recurse=*/false)) state.insert(prefix + b.key(), Exported(b.value()));
  };
  // The root by itself: named_modules() can only include it where it is held by a shared_ptr.
  add_module("", model);
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    add_module(item.key() + ".", *item.value());
  }
  return SerializeTensorDict(state);
}

std::string SerializeTensorDict(const c10::Dict<std::string, torch::Tensor>& tensors) {
  return WriteTorchArchive(tensors);
}

}  // namespace mgpu
