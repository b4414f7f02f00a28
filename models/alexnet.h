// AlexNet in torchvision's layout (the "one weird trick" variant): features = conv 64@11x11
// stride 4 pad 2, ReLU, max-pool 3/2, conv 192@5x5 pad 2, ReLU, max-pool 3/2, conv 384@3x3,
// ReLU, conv 256@3x3, ReLU, conv 256@3x3, ReLU, max-pool 3/2; adaptive average pool to 6x6;
// classifier = dropout, 9216→4096, ReLU, dropout, 4096→4096, ReLU, 4096→classes.
// 61,100,840 parameters for 3 channels and 1000 classes. Takes images of 63x63 pixels or more
// (224 and 227 give the classic 6x6 feature map without pooling).
#pragma once

#include "models/classifier.h"

namespace mgpu {

class AlexNet : public Classifier {
 public:
  // Throws BadInputError for images smaller than kMinSide pixels.
  AlexNet(int64_t in_channels, int64_t num_classes, int64_t height, int64_t width);
  torch::Tensor forward(torch::Tensor images) override;

  // The smallest side for which the three max-pools still have a 3x3 window to pool.
  static constexpr int64_t kMinSide = 63;

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::AdaptiveAvgPool2d avgpool_{nullptr};
  torch::nn::Sequential classifier_{nullptr};
};

}  // namespace mgpu
