#include "config/precision.h"

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

const std::vector<std::string>& PrecisionNames() {
  static const std::vector<std::string> names = {"fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "o2"};
  return names;
}

Precision ParsePrecision(const std::string& name) {
  const auto& names = PrecisionNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Precision>(i);
  }
  throw BadInputError(fmt::format("unknown precision '{}'; available: {}", name, fmt::join(names, ", ")));
}

const std::string& PrecisionName(Precision precision) { return PrecisionNames()[static_cast<size_t>(precision)]; }

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

std::optional<FloatFormat> AutocastFormat(Precision precision) {
  if (precision == Precision::kAmpFp16) return FloatFormat::kFloat16;
  if (precision == Precision::kAmpBf16) return FloatFormat::kBFloat16;
  return std::nullopt;
}

FloatFormat ModelFormat(Precision precision) {
  return precision == Precision::kFp16 || precision == Precision::kO2 ? FloatFormat::kFloat16 : FloatFormat::kFloat32;
}

bool UsesMasterWeights(Precision precision) { return precision == Precision::kO2; }

}  // namespace mgpu
