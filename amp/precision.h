// Precision policies: how a run's arithmetic is carried out.
//   fp32  IEEE float32 everywhere; TF32 tensor-core math off (cuBLAS and cuDNN).
//   tf32  float32 storage, TF32 tensor-core math allowed for matmul and convolution on CUDA.
// (Autocast and loss-scaled policies join these in amp/ as they are built.)
#pragma once

#include <string>
#include <vector>

namespace mgpu {

enum class Precision { kFp32, kTf32 };

const std::vector<std::string>& PrecisionNames();
// Throws BadInputError naming the accepted values.
Precision ParsePrecision(const std::string& name);
std::string PrecisionName(Precision precision);

// Sets the process-wide math flags the policy implies (TF32 on or off). On a CPU-only run the
// flags have no effect on results.
void ApplyPrecisionMathMode(Precision precision);

}  // namespace mgpu
