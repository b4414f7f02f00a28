// model_state_dict.pt: a run's trained weights for Python. torch.load(path, weights_only=True)
// reads it as a dict of name → CPU float32 tensor (integer buffers such as batch norm's
// num_batches_tracked keep int64), in the order of PyTorch's own state_dict(): module by module,
// each module's parameters, then its buffers. The names are the model's own, which for the
// built-in resnet, vgg and alexnet models are torchvision's (models/model_factory.h), so
//   model = torchvision.models.resnet18(num_classes=10)
//   model.load_state_dict(torch.load("RUN/model_state_dict.pt"))
// loads a run whose architecture is torchvision's; docs/GUIDE.md "Using the trained model in Python"
// lists where mgpu's architectures differ (small-image stems and heads, input channels).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

// `model`'s parameters and buffers as a torch.save archive (zip). `stepped` are the optimizer's
// stepped parameters in model.parameters() order (FusedOptimizer::stepped_parameters): where the
// optimizer keeps float32 masters of float16 weights (--precision o2), the masters are exported
// instead of their rounded float16 copies. Every floating-point tensor is written as float32.
std::string SerializeStateDict(torch::nn::Module& model, const std::vector<torch::Tensor>& stepped);

// `tensors` as a torch.save archive that torch.load(weights_only=True) reads as a plain dict
// (worker/torch_archive.h).
std::string SerializeTensorDict(const c10::Dict<std::string, torch::Tensor>& tensors);

}  // namespace mgpu
