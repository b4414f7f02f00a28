#include "worker/input_recipe.h"

#include <cmath>

#include <fmt/format.h>

namespace mgpu {
namespace {

// torchvision's transforms for the evaluation geometry (data/augment.h, data/streaming_images.h).
std::string ResizeRecipe(const TrainConfig& config, const std::string& data_loading, ImageSize out) {
  if (data_loading == "stream") {
    const long long shorter = std::llround(static_cast<double>(out.height) / 0.875);
    return fmt::format("Resize({}) of the shorter side, bilinear, then CenterCrop({})", shorter, out.height);
  }
  std::string recipe;
  if (config.dataset == "imagefolder" || config.dataset == "webdataset") {
    recipe = fmt::format("Resize(({0}, {0})) bilinear when loaded (the aspect ratio not kept)", config.image_size);
  }
  const bool resized = (config.augment == "resize" || config.augment == "rrc-flip") && config.resize > 0;
  if (resized) {
    recipe += fmt::format("{0}Resize(({1}, {1}), antialias=True) bilinear", recipe.empty() ? "" : ", then ", config.resize);
  }
  return recipe.empty() ? "none (the images as stored)" : recipe;
}

}  // namespace

nlohmann::json InputRecipe(const TrainConfig& config, const std::string& data_loading, const SampleSource& test) {
  const ImageSize size = test.image_size();
  return nlohmann::json{
      {"resize", ResizeRecipe(config, data_loading, size)},
      {"height", size.height},
      {"width", size.width},
      {"channels", test.channels()},
      {"channel_order", test.channels() == 3 ? "RGB" : "grayscale"},
      {"scale", "uint8 / 255"},
      {"mean", test.mean()},
      {"std", test.stddev()},
      {"layout", "NCHW float32"},
  };
}

}  // namespace mgpu
