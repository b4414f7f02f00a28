// The interface every mgpu model implements: images in, class logits out.
#pragma once

#include <torch/torch.h>

namespace mgpu {

class Classifier : public torch::nn::Module {
 public:
  // images: (B, C, H, W) float; returns logits (B, num_classes).
  virtual torch::Tensor forward(torch::Tensor images) = 0;
};

// Number of trainable scalars.
int64_t CountParameters(torch::nn::Module& module);

}  // namespace mgpu
