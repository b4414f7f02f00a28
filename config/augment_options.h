// --augment and its parameters, without LibTorch: the policies' names and the checks of their
// parameters, which ValidateConfig runs before any worker starts. data/augment.h applies them
// (its Augmentation describes each policy and its torchvision equivalent).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

struct AugmentOptions {
  std::string kind = "none";       // one of AugmentNames()
  double affine_degrees = 10;      // rotation drawn from [-degrees, degrees]
  double affine_translate = 0.1;   // shift drawn up to this fraction of width / height
  double affine_scale_min = 0.9;   // scale drawn from [min, max]
  double affine_scale_max = 1.1;
  std::string affine_interpolation = "nearest";  // nearest | bilinear (torchvision: nearest)
  int64_t crop_padding = 4;        // crop-flip
  int64_t resize = 0;              // resize: the side N (required); rrc-flip: N, 0 = input size
  uint64_t seed = 0;
};

// The policy names, in the order help texts list them.
const std::vector<std::string>& AugmentNames();
const std::vector<std::string>& InterpolationNames();

// Throws BadInputError naming the flag for invalid parameters.
void ValidateAugmentOptions(const AugmentOptions& options);

}  // namespace mgpu
