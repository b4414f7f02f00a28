#include "models/memory_format.h"

namespace mgpu {

void ConvertToChannelsLast(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  auto restride = [](torch::Tensor& tensor) {
    if (tensor.defined() && tensor.dim() == 4) tensor.set_data(tensor.contiguous(torch::MemoryFormat::ChannelsLast));
  };
  for (auto& parameter : model.parameters()) restride(parameter);
  for (auto& buffer : model.buffers()) restride(buffer);
}

torch::Tensor ImagesInFormat(const torch::Tensor& images, bool channels_last) {
  return channels_last ? images.contiguous(torch::MemoryFormat::ChannelsLast) : images;
}

}  // namespace mgpu
