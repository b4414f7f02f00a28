// Precision policies (--precision), without LibTorch: their names, the seed-style spelling
// `--dtype D [--amp]`, the policy a device runs, and the floating-point formats each computes in.
// amp/precision.h maps the formats to LibTorch's dtypes and applies the policies.
//   fp32      IEEE float32 everywhere; TF32 tensor-core math off (cuBLAS and cuDNN).
//   tf32      float32 storage, TF32 tensor-core math allowed for matmul and convolution on CUDA.
//   amp-fp16  float32 model; forward and loss under autocast to float16 (amp/autocast.h).
//   amp-bf16  the same with bfloat16.
//   fp16      the whole model in float16 except BatchNorm (float32), inputs cast to float16;
//             the optimizer steps the float16 parameters directly.
//   o2        as fp16, but the optimizer keeps float32 master weights, steps them and copies
//             them back into the float16 model after each step (Apex's O2).
// Loss scaling is a separate choice (config/loss_scaling.h, amp/grad_scaler.h), off unless asked
// for, as in PyTorch: float16 gradients smaller than 2^-24 underflow to zero, so amp-fp16, fp16
// and o2 usually want `--loss-scale dynamic`; bfloat16 has float32's range and does not need it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/choices.h"

namespace mgpu {

// In PrecisionNames()'s order.
enum class Precision { kFp32, kTf32, kAmpFp16, kAmpBf16, kFp16, kO2 };

const std::vector<std::string>& PrecisionNames();
// Throws BadInputError naming the accepted values.
Precision ParsePrecision(const std::string& name);
const std::string& PrecisionName(Precision precision);

// The policy that the seed-style spelling `--dtype D [--amp]` stands for:
//   fp32 → fp32, fp16 → fp16, fp16 + amp → amp-fp16, bf16 + amp → amp-bf16, amp alone →
//   amp-fp16 (torch.autocast's CUDA default). Throws BadInputError for the combinations that
// name no policy (bf16 without --amp, fp32 with --amp).
Precision PrecisionFromDtype(const std::string& dtype, bool amp);

// The policy a run computes with on its device, and what the start-up table and log say about it.
struct DevicePrecision {
  Precision precision;
  std::string note;     // why `precision` is not the policy the flags name elsewhere; "" when it is
  std::string warning;  // the cost of a policy asked for by name on this device; "" when none
};
// Autocast to float16 on a CPU finds few fast kernels: an AlexNet step took 19.1 s against 0.17 s
// in fp32 and 0.14 s in amp-bf16, and torch.autocast("cpu") defaults to bfloat16. So the
// seed-style spellings `--amp` and `--dtype fp16 --amp` (`spelled`: those flags as given, "" when
// --precision or a config file named the policy) ask for autocast and get amp-bf16 on a CPU, with
// a note saying why; `--precision amp-fp16` named on a CPU is kept, with a warning of its cost.
// On CUDA every policy is kept as asked.
DevicePrecision PrecisionForDevice(Precision requested, const std::string& spelled, bool cuda);

// The floating-point formats of the policies (LibTorch's dtypes: amp/precision.h).
enum class FloatFormat { kFloat32, kFloat16, kBFloat16 };
// The autocast format of the amp-* policies; nullopt for the others.
std::optional<FloatFormat> AutocastFormat(Precision precision);
// The format of the model's parameters (BatchNorm aside) and of its inputs: float16 for fp16
// and o2, float32 otherwise.
FloatFormat ModelFormat(Precision precision);
// Whether the optimizer keeps float32 master copies of low-precision parameters (o2).
bool UsesMasterWeights(Precision precision);

}  // namespace mgpu

template <>
struct fmt::formatter<mgpu::Precision> : mgpu::EnumNameFormatter<mgpu::Precision, mgpu::PrecisionName> {};
