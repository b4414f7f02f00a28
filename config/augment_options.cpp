#include "config/augment_options.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

const std::vector<std::string>& AugmentNames() {
  static const std::vector<std::string> names = {"none", "affine", "crop-flip", "resize", "rrc-flip"};
  return names;
}

const std::vector<std::string>& InterpolationNames() {
  static const std::vector<std::string> names = {"nearest", "bilinear"};
  return names;
}

void ValidateAugmentOptions(const AugmentOptions& options) {
  const auto& names = AugmentNames();
  if (std::find(names.begin(), names.end(), options.kind) == names.end()) {
    throw BadInputError(fmt::format("--augment '{}' is not one of: {}", options.kind,
                                    fmt::join(names, ", ")));
  }
  const auto& interpolations = InterpolationNames();
  if (std::find(interpolations.begin(), interpolations.end(), options.affine_interpolation) == interpolations.end()) {
    throw BadInputError(fmt::format("--affine-interpolation '{}' is not one of: {}", options.affine_interpolation,
                                    fmt::join(interpolations, ", ")));
  }
  if (!(options.affine_degrees >= 0 && options.affine_degrees <= 180)) {
    throw BadInputError(fmt::format("--affine-degrees {} must be within [0, 180]", options.affine_degrees));
  }
  if (!(options.affine_translate >= 0 && options.affine_translate <= 1)) {
    throw BadInputError(fmt::format("--affine-translate {} must be a fraction of the image size "
                                    "within [0, 1]", options.affine_translate));
  }
  if (!(options.affine_scale_min > 0 && options.affine_scale_min <= options.affine_scale_max)) {
    throw BadInputError(fmt::format("--affine-scale {},{} must be a range lo,hi with 0 < lo <= hi",
                                    options.affine_scale_min, options.affine_scale_max));
  }
  if (options.crop_padding < 0) {
    throw BadInputError(fmt::format("--crop-padding {} must be >= 0", options.crop_padding));
  }
  if (options.resize < 0 || (options.kind == "resize" && options.resize == 0)) {
    throw BadInputError(fmt::format("--augment {} needs --resize N with N > 0 (the output side in "
                                    "pixels, e.g. 227 for AlexNet); got {}",
                                    options.kind, options.resize));
  }
}

}  // namespace mgpu
