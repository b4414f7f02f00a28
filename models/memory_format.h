// Channels-last (NHWC) storage for convolutional models (--channels-last).
//
// cuDNN's fastest float16/bfloat16 convolutions (tensor cores) work on NHWC data; with NCHW
// tensors every convolution pays for transposes around the kernel. Converting the weights and
// the input batches once lets the whole network run in NHWC: convolutions, batch norm, pooling
// and activations keep the format of their input. Values are unchanged; only strides differ.
#pragma once

#include <torch/torch.h>

namespace mgpu {

// Restrides every 4-dimensional parameter and buffer of `model` (and its submodules) to
// channels-last in place; parameters stay the same tensors (optimizers holding them see the
// change). Others are left as they are.
void ConvertToChannelsLast(torch::nn::Module& model);

// `images` (B, C, H, W) in the memory format the model's convolutions expect.
torch::Tensor ImagesInFormat(const torch::Tensor& images, bool channels_last);

}  // namespace mgpu
