#include "models/vgg.h"

#include <map>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"
#include "models/batch_norm_act.h"
#include "models/global_average_pool.h"
#include "models/max_pool.h"

namespace mgpu {

namespace nn = torch::nn;

namespace {

constexpr int64_t kPool = 0;  // a 2x2 max-pool in a configuration; other entries are conv widths

const std::map<int, std::vector<int64_t>>& Configurations() {
  static const std::map<int, std::vector<int64_t>> configs = {
      {11, {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool}},
      {13, {64, 64, kPool, 128, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool}},
      {16, {64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool, 512, 512, 512, kPool, 512, 512,
            512, kPool}},
      {19, {64, 64, kPool, 128, 128, kPool, 256, 256, 256, 256, kPool, 512, 512, 512, 512, kPool,
            512, 512, 512, 512, kPool}},
  };
  return configs;
}

}  // namespace

Vgg::Vgg(int depth, int64_t in_channels, int64_t num_classes, int64_t height, int64_t width) {
  const auto config = Configurations().find(depth);
  if (config == Configurations().end()) {
    throw BadInputError(fmt::format("VGG-{} does not exist; depths are 11, 13, 16 and 19", depth));
  }
  if (height < kMinSide || width < kMinSide) {
    throw BadInputError(fmt::format(
        "VGG needs images of at least {0}x{0} pixels (five 2x2 max-pools), got {1}x{2}; resize "
        "them, e.g. --augment resize --resize 32",
        kMinSide, height, width));
  }
  features_ = register_module("features", nn::Sequential());
  int64_t channels = in_channels;
  for (const int64_t entry : config->second) {
    if (entry == kPool) {
      features_->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
      continue;
    }
    features_->push_back(nn::Conv2d(nn::Conv2dOptions(channels, entry, 3).padding(1)));
    features_->push_back(nn::BatchNorm2d(entry));
    features_->push_back(nn::ReLU(nn::ReLUOptions(true)));
    channels = entry;
  }
  classifier_ = register_module("classifier", nn::Linear(channels, num_classes));

  // torchvision's initialization: He-normal convolutions (fan-out), unit batch norms, small
  // Gaussian classifier weights, zero biases.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      nn::init::zeros_(conv->bias);
    } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    } else if (auto* linear = module->as<nn::Linear>()) {
      nn::init::normal_(linear->weight, 0.0, 0.01);
      nn::init::zeros_(linear->bias);
    }
  }
}

torch::Tensor Vgg::forward(torch::Tensor x) {
  // features_: (conv, batch norm, relu) per conv and the max-pools, as the constructor made them;
  // each triple is one ConvBatchNormAct.
  for (size_t i = 0; i < features_->size(); ++i) {
    if (auto* conv = features_[i]->as<nn::Conv2d>()) {
      x = ConvBatchNormAct(x, *conv, *features_[i + 1]->as<nn::BatchNorm2d>(), Activation::kRelu);
      i += 2;
    } else {
      x = MaxPool(x, *features_[i]->as<nn::MaxPool2d>());
    }
  }  // (B, 512, H/32, W/32)
  x = GlobalAveragePool(x);  // (B, 512)
  return classifier_(x);       // (B, classes)
}

}  // namespace mgpu
