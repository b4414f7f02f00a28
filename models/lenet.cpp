#include "models/lenet.h"

#include "common/status.h"
#include "models/channel_bias.h"
#include "models/conv_relu_pool.h"
#include "models/linear_relu_chain.h"

namespace mgpu {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

LeNet::LeNet(int64_t in_channels, int64_t num_classes, int64_t height, int64_t width) {
  // Spatial size: pad-2 conv keeps H, pool halves, 5x5 conv takes 4, pool halves.
  const int64_t h = (height / 2 - 4) / 2, w = (width / 2 - 4) / 2;
  if (h < 1 || w < 1) {
    throw BadInputError("LeNet needs images of at least 12x12 pixels, got " +
                        std::to_string(height) + "x" + std::to_string(width));
  }
  conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in_channels, 6, 5).padding(2)));
  conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(6, 16, 5)));
  fc1_ = register_module("fc1", nn::Linear(16 * h * w, 120));
  fc2_ = register_module("fc2", nn::Linear(120, 84));
  fc3_ = register_module("fc3", nn::Linear(84, num_classes));
}

// Where mgpu's fused kernels do not apply (autocast, half precision, channels-last,
// --fused-kernels false), on CUDA the bias goes on in a step of its own, whose gradient sums faster
// than the convolution's (models/channel_bias.h); on the CPU oneDNN adds it inside the convolution.
torch::Tensor LeNet::Convolve(nn::Conv2d& conv, const torch::Tensor& x) {
  if (!x.is_cuda()) return conv(x);
  const auto& options = conv->options;
  const auto without_bias = F::Conv2dFuncOptions().stride(options.stride()).padding(options.padding())
                                .dilation(options.dilation()).groups(options.groups());
  return AddChannelBias(F::conv2d(x, conv->weight, without_bias), conv->bias);
}

torch::Tensor LeNet::ConvolveReluPool(nn::Conv2d& conv, const torch::Tensor& x) {
  if (FusedConvReluPoolApplies(x, *conv)) return ConvReluPool(x, *conv);
  return F::max_pool2d(torch::relu(Convolve(conv, x)), F::MaxPool2dFuncOptions(2));
}

torch::Tensor LeNet::forward(torch::Tensor x) {
  x = ConvolveReluPool(conv1_, x);  // (B, 6, H/2, W/2)
  x = ConvolveReluPool(conv2_, x);  // (B, 16, h, w)
  x = x.flatten(1);                 // (B, 16*h*w)
  if (const std::vector<nn::Linear> head = {fc1_, fc2_, fc3_}; FusedLinearReluChainApplies(x, head)) {
    return LinearReluChain(x, head);  // (B, classes)
  }
  x = torch::relu(fc1_(x));         // (B, 120)
  x = torch::relu(fc2_(x));         // (B, 84)
  return fc3_(x);                   // (B, classes)
}

}  // namespace mgpu
