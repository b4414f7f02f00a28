#include "amp/precision.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

bool IsBatchNorm(torch::nn::Module& module) {
  return module.as<torch::nn::BatchNorm1d>() != nullptr || module.as<torch::nn::BatchNorm2d>() != nullptr ||
         module.as<torch::nn::BatchNorm3d>() != nullptr;
}

}  // namespace

const std::vector<std::string>& PrecisionNames() {
  static const std::vector<std::string> names = {"fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "o2"};
  return names;
}

Precision ParsePrecision(const std::string& name) {
  static const std::vector<Precision> values = {Precision::kFp32,    Precision::kTf32, Precision::kAmpFp16,
                                                Precision::kAmpBf16, Precision::kFp16, Precision::kO2};
  const auto& names = PrecisionNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return values[i];
  }
  throw BadInputError(fmt::format("unknown precision '{}'; available: {}", name, fmt::join(names, ", ")));
}

std::string PrecisionName(Precision precision) {
  return PrecisionNames()[static_cast<size_t>(precision)];
}

Precision PrecisionFromDtype(const std::string& dtype, bool amp) {
  if (dtype == "fp32" || dtype.empty()) {
    if (amp && dtype.empty()) return Precision::kAmpFp16;
    if (amp) {
      throw BadInputError("--dtype fp32 with --amp names no policy: autocast needs a lower precision "
                          "(--dtype fp16 or bf16), or drop --amp");
    }
    return Precision::kFp32;
  }
  if (dtype == "fp16") return amp ? Precision::kAmpFp16 : Precision::kFp16;
  if (dtype == "bf16") {
    if (amp) return Precision::kAmpBf16;
    throw BadInputError("--dtype bf16 without --amp names no policy: a whole bfloat16 model is not "
                        "supported; add --amp (autocast to bfloat16, i.e. --precision amp-bf16)");
  }
  throw BadInputError(fmt::format("--dtype '{}' is not one of: fp32, fp16, bf16", dtype));
}

DevicePrecision PrecisionForDevice(Precision requested, const std::string& spelled, bool cuda) {
  if (cuda || requested != Precision::kAmpFp16) return {requested, "", ""};
  if (!spelled.empty()) {
    return {Precision::kAmpBf16,
            fmt::format("{} on CPU means amp-bf16: float16 autocast is about 100x slower there, and bfloat16 is "
                        "torch.autocast's CPU default; --precision amp-fp16 forces float16", spelled),
            ""};
  }
  return {requested, "",
          "--precision amp-fp16 on CPU: float16 autocast has few fast CPU kernels and trains about 100x slower than "
          "fp32; --precision amp-bf16 is as fast as fp32 and needs no loss scaling"};
}

void ApplyPrecisionMathMode(Precision precision) {
  const bool allow_tf32 = precision == Precision::kTf32;
  at::globalContext().setAllowTF32CuBLAS(allow_tf32);
  at::globalContext().setAllowTF32CuDNN(allow_tf32);
}

std::optional<torch::ScalarType> AutocastDtype(Precision precision) {
  if (precision == Precision::kAmpFp16) return torch::kHalf;
  if (precision == Precision::kAmpBf16) return torch::kBFloat16;
  return std::nullopt;
}

torch::ScalarType ModelDtype(Precision precision) {
  return precision == Precision::kFp16 || precision == Precision::kO2 ? torch::kHalf : torch::kFloat;
}

bool UsesMasterWeights(Precision precision) { return precision == Precision::kO2; }

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
