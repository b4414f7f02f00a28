// ResNet-18/34 (BasicBlock) and ResNet-50 (Bottleneck, expansion 4) as in torchvision (v1.5:
// a bottleneck strides in its 3x3 conv), with one of two stems chosen from the image size:
//   - CIFAR stem for images of at most kCifarStemMaxSide pixels: conv 64@3x3 stride 1, BN, ReLU,
//     no max-pool, so 32x32 images reach layer4 as 4x4 maps (11,173,962 parameters for
//     ResNet-18 at 10 classes);
//   - ImageNet stem for larger images: conv 64@7x7 stride 2, BN, ReLU, max-pool 3/2
//     (25,557,032 parameters for ResNet-50 at 1000 classes, torchvision's count).
// Then layer1..layer4, adaptive average pool to 1x1 and fc. Any input channel count works
// (1-channel Fashion-MNIST included). Initialization follows torchvision.
#pragma once

#include "models/batch_norm_act.h"
#include "models/classifier.h"

namespace mgpu {

enum class ResNetStem { kCifar, kImageNet };

class ResNet : public Classifier {
 public:
  // depth: 18, 34 or 50. Throws BadInputError for another depth.
  ResNet(int depth, int64_t in_channels, int64_t num_classes, int64_t height, int64_t width);
  torch::Tensor forward(torch::Tensor images) override;

  static constexpr int64_t kCifarStemMaxSide = 64;
  // The stem ResNet picks for images of this size.
  static ResNetStem StemFor(int64_t height, int64_t width);
  ResNetStem stem() const { return stem_; }

 private:
  static ForkedActivation RunLayer(torch::nn::Sequential& layer, ForkedActivation x, bool last_layer);

  ResNetStem stem_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::MaxPool2d maxpool_{nullptr};  // ImageNet stem only
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

}  // namespace mgpu
