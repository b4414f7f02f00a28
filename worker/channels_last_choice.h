// Which memory layout a run trains in (--channels-last auto|true|false), and why.
//
// NHWC pays where cuDNN's tensor-core convolutions run: 16-bit convolutions on CUDA, whose NCHW
// form transposes around every kernel. It costs where they do not: on the CPU, in float32, and
// in nets whose convolutions are too small to outweigh the conversions of each batch and
// gradient (LeNet, linear models). The auto rule is this one function, so that new measurements
// change it in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "amp/precision.h"

namespace mgpu {

// Below this many convolution weights (elements of 4-dimensional parameters) a net counts as
// LeNet-sized: LeNet has 2,550, ResNet-18 11 million.
constexpr int64_t kMinConvolutionWeightsForChannelsLast = 100'000;

struct ChannelsLastChoice {
  bool on = false;
  std::string reason;  // for the start-up table, e.g. "auto: a convolutional net on CUDA under amp-bf16"
};

// `requested`: --channels-last (nullopt: auto). `model`: the net as built, before any
// conversion; `device` and `precision`: where and how it trains.
ChannelsLastChoice ChooseChannelsLast(std::optional<bool> requested, torch::nn::Module& model,
                                      const torch::Device& device, Precision precision);

}  // namespace mgpu
