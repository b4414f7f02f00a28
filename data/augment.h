// Per-sample data augmentation on uint8 (C, H, W) pixels, applied by BatchLoader before
// normalization. A sample's random draws come from a counter-based stream keyed by
// (seed, epoch, the sample's index in its data set), so an augmented batch is the same whatever
// the number of loader threads, their timing or the rank that loads it.
//
// Policies (torchvision equivalents):
//   none       the pixels as stored
//   affine     RandomAffine(degrees, translate=(t, t), scale=(lo, hi)), nearest or bilinear,
//              fill 0; the output keeps the input size
//   crop-flip  RandomCrop(size, padding=p) + RandomHorizontalFlip(0.5): zero-pad by p, crop a
//              window of the input size (CIFAR's 32x32), mirror with probability 1/2
//   resize     Resize((N, N)), antialiased bilinear; deterministic (e.g. 227 for AlexNet)
//   rrc-flip   RandomResizedCrop(N, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip;
//              N = the input size when --resize is 0
// OutputSize() gives the batch's image size, which the model must be built for; resize and
// rrc-flip evaluate on the image resized to N (ForEvaluation()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/augment_options.h"
#include "data/counter_rng.h"
#include "data/image_ops.h"

namespace mgpu {

// The random parameters torchvision draws, from `rng`.
AffineParams DrawAffine(CounterRng& rng, ImageSize size, double degrees, double translate,
                        double scale_min, double scale_max);
// RandomCrop with zero padding: a window of the image's size, offset by up to `padding`
// pixels in each direction (so it stays inside the padded image).
Window DrawPaddedCrop(CounterRng& rng, ImageSize size, int64_t padding);
// RandomResizedCrop: a window inside the image covering a fraction in [scale_min, scale_max]
// of its area with aspect ratio in [ratio_min, ratio_max]; after 10 failed tries, the centred
// largest window whose ratio is within the range.
Window DrawResizedCrop(CounterRng& rng, ImageSize size, double scale_min = 0.08,
                       double scale_max = 1.0, double ratio_min = 3.0 / 4.0,
                       double ratio_max = 4.0 / 3.0);

class Augmentation {
 public:
  // Throws BadInputError naming the flag for invalid parameters.
  explicit Augmentation(AugmentOptions options);

  // The (H, W) of the images Apply writes for inputs of `input`.
  ImageSize OutputSize(ImageSize input) const;
  // True for `none`: Apply would copy the pixels.
  bool identity() const { return options_.kind == "none"; }
  // in: (C, size.height, size.width); out: (C, OutputSize(size)). Draws depend only on
  // (seed, epoch, index).
  void Apply(const uint8_t* in, int64_t channels, ImageSize size, int64_t epoch, int64_t index,
             uint8_t* out) const;
  // The deterministic transform for evaluation: the same resize for resize and rrc-flip,
  // none for the others.
  std::shared_ptr<const Augmentation> ForEvaluation() const;

  const AugmentOptions& options() const { return options_; }

 private:
  AugmentOptions options_;
  Interpolation interpolation_;
};

}  // namespace mgpu
