#include "worker/channels_last_choice.h"

#include <fmt/format.h>

namespace mgpu {
namespace {

int64_t ConvolutionWeights(torch::nn::Module& model) {
  int64_t count = 0;
  for (const torch::Tensor& parameter : model.parameters()) {
    if (parameter.dim() == 4) count += parameter.numel();
  }
  return count;
}

bool Is16Bit(Precision precision) {
  return AutocastDtype(precision).has_value() || ModelDtype(precision) != torch::kFloat;
}

}  // namespace

ChannelsLastChoice ChooseChannelsLast(std::optional<bool> requested, torch::nn::Module& model,
                                      const torch::Device& device, Precision precision) {
  if (requested) return {*requested, fmt::format("--channels-last {}", *requested ? "true" : "false")};
  if (!device.is_cuda()) return {false, "auto: off on the CPU; NHWC is for cuDNN's tensor-core convolutions"};
  if (!Is16Bit(precision)) {
    return {false, fmt::format("auto: off under {}, which has no 16-bit tensor-core convolutions",
                               PrecisionName(precision))};
  }
  const int64_t weights = ConvolutionWeights(model);
  if (weights < kMinConvolutionWeightsForChannelsLast) {
    return {false, fmt::format("auto: off, {} convolution weights are too few to repay the conversions", weights)};
  }
  return {true, fmt::format("auto: a convolutional net on CUDA under {}", PrecisionName(precision))};
}

}  // namespace mgpu
