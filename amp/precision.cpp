#include "amp/precision.h"

#include <ATen/Context.h>

namespace mgpu {
namespace {

bool IsBatchNorm(torch::nn::Module& module) {
  return module.as<torch::nn::BatchNorm1d>() != nullptr || module.as<torch::nn::BatchNorm2d>() != nullptr ||
         module.as<torch::nn::BatchNorm3d>() != nullptr;
}

torch::ScalarType Dtype(FloatFormat format) {
  switch (format) {
    case FloatFormat::kFloat16: return torch::kHalf;
    case FloatFormat::kBFloat16: return torch::kBFloat16;
    case FloatFormat::kFloat32: break;
  }
  return torch::kFloat;
}

}  // namespace

void ApplyPrecisionMathMode(Precision precision) {
  const bool allow_tf32 = precision == Precision::kTf32;
  at::globalContext().setAllowTF32CuBLAS(allow_tf32);
  at::globalContext().setAllowTF32CuDNN(allow_tf32);
}

std::optional<torch::ScalarType> AutocastDtype(Precision precision) {
  const std::optional<FloatFormat> format = AutocastFormat(precision);
  if (!format) return std::nullopt;
  return Dtype(*format);
}

torch::ScalarType ModelDtype(Precision precision) { return Dtype(ModelFormat(precision)); }

void ConvertModelForPrecision(torch::nn::Module& model, Precision precision) {
  const torch::ScalarType dtype = ModelDtype(precision);
  if (dtype == torch::kFloat) return;
  torch::NoGradGuard no_grad;
  auto convert = [dtype](torch::Tensor& t) {
    if (t.defined() && t.is_floating_point()) t.set_data(t.to(dtype));
  };
  auto convert_own = [&](torch::nn::Module& module) {
    if (IsBatchNorm(module)) return;
    for (auto& item : module.named_parameters(/*recurse=*/false)) convert(item.value());
    for (auto& item : module.named_buffers(/*recurse=*/false)) convert(item.value());
  };
  // include_self = false: the model need not be held by a shared_ptr.
  convert_own(model);
  for (const auto& module : model.modules(/*include_self=*/false)) convert_own(*module);
}

}  // namespace mgpu
