// VGG-11/13/16/19 with batch norm (configurations A, B, D and E of Simonyan & Zisserman) and
// the CIFAR head: every 3x3 conv (pad 1) is followed by BatchNorm2d and ReLU, five 2x2
// max-pools take 32x32 images to a 512x1x1 feature map, and one Linear(512, classes) classifies.
// Larger images are averaged to 1x1 first (adaptive average pool), so any side >= 32 works.
// VGG-19 at 10 classes has 20,040,522 parameters. Initialization follows torchvision.
#pragma once

#include "models/classifier.h"

namespace mgpu {

class Vgg : public Classifier {
 public:
  // depth: 11, 13, 16 or 19. Throws BadInputError for another depth or images under 32x32.
  Vgg(int depth, int64_t in_channels, int64_t num_classes, int64_t height, int64_t width);
  torch::Tensor forward(torch::Tensor images) override;

  static constexpr int64_t kMinSide = 32;  // five 2x2 max-pools

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Linear classifier_{nullptr};
};

}  // namespace mgpu
