#include "models/alexnet.h"

#include <fmt/format.h>

#include "common/status.h"
#include "models/max_pool.h"

namespace mgpu {

namespace nn = torch::nn;

namespace {

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding));
}

nn::MaxPool2d Pool() { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)); }

}  // namespace

AlexNet::AlexNet(int64_t in_channels, int64_t num_classes, int64_t height, int64_t width) {
  if (height < kMinSide || width < kMinSide) {
    throw BadInputError(fmt::format(
        "AlexNet needs images of at least {0}x{0} pixels, got {1}x{2}; resize them, e.g. "
        "--augment resize --resize 227 (or --image-size for image folders)",
        kMinSide, height, width));
  }
  features_ = register_module(
      "features", nn::Sequential(Conv(in_channels, 64, 11, 4, 2), nn::ReLU(nn::ReLUOptions(true)),
                                 Pool(),                                                  //
                                 Conv(64, 192, 5, 1, 2), nn::ReLU(nn::ReLUOptions(true)),  //
                                 Pool(),                                                  //
                                 Conv(192, 384, 3, 1, 1), nn::ReLU(nn::ReLUOptions(true)),
                                 Conv(384, 256, 3, 1, 1), nn::ReLU(nn::ReLUOptions(true)),
                                 Conv(256, 256, 3, 1, 1), nn::ReLU(nn::ReLUOptions(true)),
                                 Pool()));
  avgpool_ = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(6)));
  classifier_ = register_module(
      "classifier",
      nn::Sequential(nn::Dropout(0.5), nn::Linear(256 * 6 * 6, 4096), nn::ReLU(nn::ReLUOptions(true)),
                     nn::Dropout(0.5), nn::Linear(4096, 4096), nn::ReLU(nn::ReLUOptions(true)),
                     nn::Linear(4096, num_classes)));
}

torch::Tensor AlexNet::forward(torch::Tensor x) {
  // features_: convs, in-place relus and the pools (mgpu's kernels where they apply).
  for (const auto& module : features_->children()) {
    if (auto* conv = module->as<nn::Conv2d>()) {
      x = conv->forward(x);
    } else if (auto* relu = module->as<nn::ReLU>()) {
      x = relu->forward(x);
    } else {
      x = MaxPool(x, *module->as<nn::MaxPool2d>());
    }
  }  // (B, 256, h, w), h = w = 6 for 224 or 227 pixels
  x = avgpool_(x).flatten(1);   // (B, 9216)
  return classifier_->forward(x);  // (B, classes)
}

}  // namespace mgpu
