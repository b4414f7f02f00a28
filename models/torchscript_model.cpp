#include "models/torchscript_model.h"

#include <fstream>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// Registers `source`'s direct parameters and buffers on `target`, and a child module per script
// submodule, recursively: the tree that gives the wrapper the script module's dotted names (a
// torch::nn::Module name may not contain a dot). The tensors are the script module's own, not copies.
void RegisterScriptTensors(torch::nn::Module& target, const torch::jit::Module& source) {
  for (const auto& p : source.named_parameters(/*recurse=*/false)) {
    target.register_parameter(p.name, p.value, p.value.requires_grad());
  }
  for (const auto& b : source.named_buffers(/*recurse=*/false)) target.register_buffer(b.name, b.value);
  for (const auto& child : source.named_children()) {
    auto mirror = std::make_shared<torch::nn::Module>();
    RegisterScriptTensors(*mirror, child.value);
    target.register_module(child.name, mirror);
  }
}

// The first line of a LibTorch error, without the C++ backtrace that follows it.
std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

TorchScriptClassifier::TorchScriptClassifier(const std::string& path, const std::string& spec) {
  const std::string fix = "save the model from Python with torch.jit.script(model).save(PATH) (or torch.jit.trace)";
  if (!std::ifstream(path, std::ios::binary).good()) {
    throw BadInputError(fmt::format("--model {}: cannot open '{}' (missing or unreadable); give the path of a "
                                    "TorchScript file: {}", spec, path, fix));
  }
  try {
    module_ = torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw BadInputError(fmt::format("--model {}: '{}' is not a TorchScript archive ({}); {}. A state dict saved "
                                    "with torch.save is not one", spec, path, FirstLine(e.what_without_backtrace()), fix));
  }
  if (!module_.find_method("forward")) {
    throw BadInputError(fmt::format("--model {}: the module in '{}' has no forward method; {}", spec, path, fix));
  }
  RegisterScriptTensors(*this, module_);
  train(module_.is_training());
}

torch::Tensor TorchScriptClassifier::forward(torch::Tensor images) {
  return module_.forward({std::move(images)}).toTensor();
}

void TorchScriptClassifier::train(bool on) {
  Classifier::train(on);
  module_.train(on);
}

}  // namespace mgpu
