// The mean of each channel over the image, (B, C, H, W) -> (B, C): what ResNet and VGG compute
// with AdaptiveAvgPool2d(1) and flatten, with ATen's bits forward (the same mean) and backward (the
// same division of the gradient), but a backward that writes x's gradient in x's memory format in
// one pass. ATen's mean backward divides an expanded gradient into a new tensor that is not
// channels-last, which the channels-last batch norm before the pool then copies: two kernels in
// place of one.
#pragma once

#include <torch/torch.h>

namespace mgpu {

// x (B, C, H, W), any memory format and floating type; returns (B, C). Gradients reach x.
torch::Tensor GlobalAveragePool(const torch::Tensor& x);

}  // namespace mgpu
