#include "models/model_factory.h"

#include <fmt/format.h>

#include "common/status.h"
#include "models/alexnet.h"
#include "models/lenet.h"
#include "models/resnet.h"
#include "models/vgg.h"

namespace mgpu {

int64_t CountParameters(torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> names = {"lenet",    "alexnet",  "vgg11",   "vgg13",
                                                 "vgg16",    "vgg19",    "resnet18", "resnet34",
                                                 "resnet50"};
  return names;
}

std::shared_ptr<Classifier> MakeModel(const std::string& name, const ModelShape& shape) {
  const auto [channels, classes, height, width] = shape;
  if (name == "lenet") return std::make_shared<LeNet>(channels, classes, height, width);
  if (name == "alexnet") return std::make_shared<AlexNet>(channels, classes, height, width);
  for (const int depth : {11, 13, 16, 19}) {
    if (name == "vgg" + std::to_string(depth)) {
      return std::make_shared<Vgg>(depth, channels, classes, height, width);
    }
  }
  for (const int depth : {18, 34, 50}) {
    if (name == "resnet" + std::to_string(depth)) {
      return std::make_shared<ResNet>(depth, channels, classes, height, width);
    }
  }
  throw BadInputError(fmt::format("unknown model '{}'; available: {}", name,
                                  fmt::join(ModelNames(), ", ")));
}

}  // namespace mgpu
