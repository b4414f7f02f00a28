#include "dataparallel/data_parallel.h"

#include <optional>

#include <fmt/format.h>

#include "amp/autocast.h"
#include "common/status.h"
#include "dataparallel/libtorch_data_parallel.h"
#include "dataparallel/replicated_data_parallel.h"

namespace mgpu {

torch::Tensor PolicyForward(Classifier& model, const torch::Tensor& images, Precision precision,
                            bool autocast_cache) {
  std::optional<AutocastScope> autocast;
  if (const auto dtype = AutocastDtype(precision)) {
    autocast.emplace(images.device().type(), *dtype, /*enabled=*/true, autocast_cache);
  }
  return model.forward(images.to(ModelDtype(precision))).to(torch::kFloat);
}

std::unique_ptr<DataParallelEngine> MakeDataParallel(std::shared_ptr<Classifier> primary,
                                                     DataParallelOptions options) {
  if (options.devices.empty()) throw BadInputError("--dp-devices: no device given");
  if (options.cuda_graphs) {
    if (options.impl != "mgpu") {
      throw BadInputError(fmt::format("--cuda-graphs cannot be combined with --dp-impl {}, which rebuilds its replicas "
                                      "at every step; use --dp-impl mgpu or drop --cuda-graphs",
                                      options.impl));
    }
    for (const auto& device : options.devices) {
      if (!device.is_cuda()) {
        throw BadInputError(fmt::format("--cuda-graphs needs CUDA devices, but --dp-devices names {}; drop "
                                        "--cuda-graphs or list CUDA devices only",
                                        device.str()));
      }
    }
  }
  if (options.impl == "mgpu") return std::make_unique<ReplicatedDataParallel>(std::move(primary), std::move(options));
  if (options.impl == "libtorch") return std::make_unique<LibTorchDataParallel>(std::move(primary), std::move(options));
  throw BadInputError(fmt::format("--dp-impl '{}' is not one of: mgpu, libtorch", options.impl));
}

}  // namespace mgpu
