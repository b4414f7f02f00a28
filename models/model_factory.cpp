#include "models/model_factory.h"

#include <fmt/format.h>

#include "common/status.h"
#include "models/lenet.h"

namespace mgpu {

int64_t CountParameters(torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> names = {"lenet"};
  return names;
}

std::shared_ptr<Classifier> MakeModel(const std::string& name, const ModelShape& shape) {
  if (name == "lenet") {
    return std::make_shared<LeNet>(shape.in_channels, shape.num_classes, shape.height, shape.width);
  }
  throw BadInputError(fmt::format("unknown model '{}'; available: {}", name,
                                  fmt::join(ModelNames(), ", ")));
}

}  // namespace mgpu
