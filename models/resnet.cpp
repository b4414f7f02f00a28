#include "models/resnet.h"

#include <fmt/format.h>

#include "common/status.h"
#include "models/batch_norm_act.h"
#include "models/global_average_pool.h"
#include "models/max_pool.h"

namespace mgpu {

namespace nn = torch::nn;

namespace {

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// A projection shortcut (1x1 conv + BN) where the block changes shape, else none. A Sequential,
// for torchvision's parameter names (downsample.0.weight, downsample.1.running_mean, ...).
nn::Sequential Downsample(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return nullptr;
  return nn::Sequential(Conv(in, out, 1, stride), nn::BatchNorm2d(out));
}

// The block's shortcut: x itself, or its projection.
torch::Tensor Shortcut(nn::Sequential& downsample, const torch::Tensor& x) {
  if (!downsample) return x;
  torch::Tensor projected = downsample[0]->as<nn::Conv2d>()->forward(x);
  return BatchNormAct(projected, *downsample[1]->as<nn::BatchNorm2d>(), {}, Activation::kNone);
}

// A block's output, relu(bn(x) + identity): forked where the next block reads it.
ForkedActivation Output(const torch::Tensor& x, nn::BatchNorm2dImpl& bn, const torch::Tensor& identity, bool fork) {
  if (fork) return BatchNormActForked(x, bn, identity, Activation::kRelu);
  const torch::Tensor y = BatchNormAct(x, bn, identity, Activation::kRelu);
  return {y, y};
}

// Two 3x3 convs; ResNet-18/34.
class BasicBlockImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", Conv(in, planes, 3, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", Conv(planes, planes, 3, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(planes))),
        downsample_(Downsample(in, planes, stride)) {
    if (downsample_) register_module("downsample", downsample_);
  }

  // x.first feeds conv1, x.second the shortcut; the output forked where another block reads it.
  ForkedActivation Run(const ForkedActivation& x, bool fork_output) {
    const torch::Tensor identity = Shortcut(downsample_, x.second);  // (B, planes, h, w)
    const torch::Tensor out = BatchNormAct(conv1_(x.first), *bn1_, {}, Activation::kRelu);
    return Output(conv2_(out), *bn2_, identity, fork_output);
  }
  // The block alone (nn::Sequential's forward); ResNet::forward calls Run.
  torch::Tensor forward(torch::Tensor x) { return Run({x, x}, false).first; }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Sequential downsample_;
};

// 1x1 reduce, 3x3 (strided), 1x1 expand by 4; ResNet-50.
class BottleneckImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", Conv(in, planes, 1, 1))),
        bn1_(register_module("bn1", nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", Conv(planes, planes, 3, stride))),
        bn2_(register_module("bn2", nn::BatchNorm2d(planes))),
        conv3_(register_module("conv3", Conv(planes, planes * kExpansion, 1, 1))),
        bn3_(register_module("bn3", nn::BatchNorm2d(planes * kExpansion))),
        downsample_(Downsample(in, planes * kExpansion, stride)) {
    if (downsample_) register_module("downsample", downsample_);
  }

  ForkedActivation Run(const ForkedActivation& x, bool fork_output) {
    const torch::Tensor identity = Shortcut(downsample_, x.second);  // (B, 4 planes, h, w)
    torch::Tensor out = BatchNormAct(conv1_(x.first), *bn1_, {}, Activation::kRelu);
    out = BatchNormAct(conv2_(out), *bn2_, {}, Activation::kRelu);
    return Output(conv3_(out), *bn3_, identity, fork_output);
  }
  torch::Tensor forward(torch::Tensor x) { return Run({x, x}, false).first; }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  nn::Sequential downsample_;
};

// `blocks` blocks of `planes`; the first one strides and projects. Updates `in` to the output
// channel count.
template <typename Block>
nn::Sequential MakeLayer(int64_t& in, int64_t planes, int blocks, int64_t stride) {
  nn::Sequential layer;
  for (int i = 0; i < blocks; ++i) {
    layer->push_back(std::make_shared<Block>(in, planes, i == 0 ? stride : 1));
    in = planes * Block::kExpansion;
  }
  return layer;
}

}  // namespace

ResNetStem ResNet::StemFor(int64_t height, int64_t width) {
  return std::max(height, width) <= kCifarStemMaxSide ? ResNetStem::kCifar : ResNetStem::kImageNet;
}

ResNet::ResNet(int depth, int64_t in_channels, int64_t num_classes, int64_t height, int64_t width)
    : stem_(StemFor(height, width)) {
  if (depth != 18 && depth != 34 && depth != 50) {
    throw BadInputError(fmt::format("ResNet-{} is not available; depths are 18, 34 and 50", depth));
  }
  if (stem_ == ResNetStem::kCifar) {
    conv1_ = register_module("conv1", Conv(in_channels, 64, 3, 1));
  } else {
    conv1_ = register_module("conv1", Conv(in_channels, 64, 7, 2));
    maxpool_ = register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  }
  bn1_ = register_module("bn1", nn::BatchNorm2d(64));

  const std::vector<int> blocks = depth == 18 ? std::vector<int>{2, 2, 2, 2} : std::vector<int>{3, 4, 6, 3};
  int64_t channels = 64;
  auto make_layer = [&](int64_t planes, int count, int64_t stride) {
    return depth == 50 ? MakeLayer<BottleneckImpl>(channels, planes, count, stride)
                       : MakeLayer<BasicBlockImpl>(channels, planes, count, stride);
  };
  layer1_ = register_module("layer1", make_layer(64, blocks[0], 1));
  layer2_ = register_module("layer2", make_layer(128, blocks[1], 2));
  layer3_ = register_module("layer3", make_layer(256, blocks[2], 2));
  layer4_ = register_module("layer4", make_layer(512, blocks[3], 2));
  fc_ = register_module("fc", nn::Linear(channels, num_classes));

  // torchvision's initialization: He-normal convolutions (fan-out), unit batch norms; fc keeps
  // the default.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
}

// The layer's blocks on x, each block's output forked for the next one (and the last block's,
// unless it is the network's).
ForkedActivation ResNet::RunLayer(nn::Sequential& layer, ForkedActivation x, bool last_layer) {
  for (size_t i = 0; i < layer->size(); ++i) {
    const bool fork = !last_layer || i + 1 < layer->size();
    if (auto* basic = layer[i]->as<BasicBlockImpl>()) {
      x = basic->Run(x, fork);
    } else {
      x = layer[i]->as<BottleneckImpl>()->Run(x, fork);
    }
  }
  return x;
}

torch::Tensor ResNet::forward(torch::Tensor images) {
  ForkedActivation x;  // an activation and its second reader's alias (models/batch_norm_act.h)
  if (maxpool_) {
    const torch::Tensor stem = BatchNormAct(conv1_(images), *bn1_, {}, Activation::kRelu);  // (B, 64, H/2, W/2)
    x = MaxPoolForked(stem, *maxpool_);                                                       // (B, 64, H/4, W/4)
  } else {
    x = BatchNormActForked(conv1_(images), *bn1_, {}, Activation::kRelu);  // CIFAR (B, 64, H, W)
  }
  x = RunLayer(layer1_, x, false);           // (B, 64 e, h, w), e = block expansion
  x = RunLayer(layer2_, x, false);           // (B, 128 e, h/2, w/2)
  x = RunLayer(layer3_, x, false);           // (B, 256 e, h/4, w/4)
  x = RunLayer(layer4_, x, true);            // (B, 512 e, h/8, w/8)
  const torch::Tensor features = GlobalAveragePool(x.first);  // (B, 512 e)
  return fc_(features);                                         // (B, classes)
}

}  // namespace mgpu
