// LeNet-5 as in the classic PyTorch MNIST experiment: conv 6@5x5 (pad 2) → ReLU → max-pool 2 →
// conv 16@5x5 → ReLU → max-pool 2 → fc 120 → fc 84 → fc classes. 61,706 parameters for
// 1×28×28 input and 10 classes.
#pragma once

#include "models/classifier.h"

namespace mgpu {

class LeNet : public Classifier {
 public:
  // The first fully connected layer's width follows from (height, width).
  LeNet(int64_t in_channels, int64_t num_classes, int64_t height = 28, int64_t width = 28);
  torch::Tensor forward(torch::Tensor images) override;

 private:
  // conv(x) with its bias: (B, C_in, H, W) -> (B, C_out, H', W').
  static torch::Tensor Convolve(torch::nn::Conv2d& conv, const torch::Tensor& x);
  // max_pool2d(relu(conv(x)), 2): mgpu's fused kernels where they apply (models/conv_relu_pool.h;
  // the fully connected layers: models/linear_relu_chain.h).
  static torch::Tensor ConvolveReluPool(torch::nn::Conv2d& conv, const torch::Tensor& x);

  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

}  // namespace mgpu
