#include "amp/precision.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

const std::vector<std::string>& PrecisionNames() {
  static const std::vector<std::string> names = {"fp32", "tf32"};
  return names;
}

Precision ParsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  throw BadInputError(fmt::format("unknown precision '{}'; available: {}", name,
                                  fmt::join(PrecisionNames(), ", ")));
}

std::string PrecisionName(Precision precision) {
  return precision == Precision::kTf32 ? "tf32" : "fp32";
}

void ApplyPrecisionMathMode(Precision precision) {
  const bool allow_tf32 = precision == Precision::kTf32;
  at::globalContext().setAllowTF32CuBLAS(allow_tf32);
  at::globalContext().setAllowTF32CuDNN(allow_tf32);
}

}  // namespace mgpu
