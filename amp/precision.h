// Precision policies on LibTorch: their dtypes, the process-wide math flags and the model's cast.
// The policies themselves (names, parsing, the seed-style spellings, what a device runs) are
// torch-free, in config/precision.h.
#pragma once

#include <optional>

#include <torch/torch.h>

#include "config/precision.h"

namespace mgpu {

// Sets the process-wide math flags the policy implies (TF32 on or off). On a CPU-only run the
// flags have no effect on results.
void ApplyPrecisionMathMode(Precision precision);

// The autocast dtype of the amp-* policies (AutocastFormat); nullopt for the others.
std::optional<torch::ScalarType> AutocastDtype(Precision precision);
// The dtype of the model's parameters (BatchNorm aside) and of its inputs (ModelFormat): float16
// for fp16 and o2, float32 otherwise.
torch::ScalarType ModelDtype(Precision precision);

// Casts `model`'s floating-point parameters and buffers to ModelDtype(precision), except those
// of BatchNorm layers, whose statistics lose too much in float16 and which cuDNN and the CPU
// kernels run in float32 on float16 inputs. Integer buffers (BatchNorm's batch count) are kept.
// A no-op for policies whose model dtype is float32.
void ConvertModelForPrecision(torch::nn::Module& model, Precision precision);

}  // namespace mgpu
