#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

AffineParams DrawAffine(CounterRng& rng, ImageSize size, double degrees, double translate,
                        double scale_min, double scale_max) {
  AffineParams params;
  params.angle_degrees = rng.Uniform(-degrees, degrees);
  const double max_dx = translate * static_cast<double>(size.width);
  const double max_dy = translate * static_cast<double>(size.height);
  // Whole pixels, rounded half to even like Python's round().
  params.translate_x = std::nearbyint(rng.Uniform(-max_dx, max_dx));
  params.translate_y = std::nearbyint(rng.Uniform(-max_dy, max_dy));
  params.scale = rng.Uniform(scale_min, scale_max);
  return params;
}

Window DrawPaddedCrop(CounterRng& rng, ImageSize size, int64_t padding) {
  Window window{0, 0, size.height, size.width};
  window.top = rng.UniformInt(-padding, padding);
  window.left = rng.UniformInt(-padding, padding);
  return window;
}

Window DrawResizedCrop(CounterRng& rng, ImageSize size, double scale_min, double scale_max,
                       double ratio_min, double ratio_max) {
  const double area = static_cast<double>(size.height * size.width);
  const double log_ratio_min = std::log(ratio_min), log_ratio_max = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(scale_min, scale_max);
    const double aspect = std::exp(rng.Uniform(log_ratio_min, log_ratio_max));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= size.width && h > 0 && h <= size.height) {
      const int64_t top = rng.UniformInt(0, size.height - h);
      const int64_t left = rng.UniformInt(0, size.width - w);
      return Window{top, left, h, w};
    }
  }
  // Fallback: the centred crop, as large as the ratio range allows.
  const double in_ratio = static_cast<double>(size.width) / static_cast<double>(size.height);
  int64_t w = size.width, h = size.height;
  if (in_ratio < ratio_min) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / ratio_min));
  } else if (in_ratio > ratio_max) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * ratio_max));
  }
  return Window{(size.height - h) / 2, (size.width - w) / 2, h, w};
}

Augmentation::Augmentation(AugmentOptions options) : options_(std::move(options)) {
  ValidateAugmentOptions(options_);
  interpolation_ = options_.affine_interpolation == "bilinear" ? Interpolation::kBilinear : Interpolation::kNearest;
}

ImageSize Augmentation::OutputSize(ImageSize input) const {
  if ((options_.kind == "resize" || options_.kind == "rrc-flip") && options_.resize > 0) {
    return ImageSize{options_.resize, options_.resize};
  }
  return input;
}

void Augmentation::Apply(const uint8_t* in, int64_t channels, ImageSize size, int64_t epoch,
                         int64_t index, uint8_t* out) const {
  CounterRng rng(options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
  const ImageSize out_size = OutputSize(size);
  const std::string& kind = options_.kind;
  if (kind == "none") {
    std::memcpy(out, in, static_cast<size_t>(channels * size.height * size.width));
  } else if (kind == "affine") {
    const AffineParams params =
        DrawAffine(rng, size, options_.affine_degrees, options_.affine_translate,
                   options_.affine_scale_min, options_.affine_scale_max);
    AffineWarp(in, channels, size, params, interpolation_, out);
  } else if (kind == "crop-flip") {
    Crop(in, channels, size, DrawPaddedCrop(rng, size, options_.crop_padding), out);
    if (rng.Coin()) FlipHorizontal(out, channels, out_size);
  } else if (kind == "resize") {
    ResizeBilinear(in, channels, size, out, out_size);
  } else {  // rrc-flip
    const Window window = DrawResizedCrop(rng, size);
    ResizeWindow(in, channels, size, window, out, out_size, /*flip=*/rng.Coin());
  }
}

std::shared_ptr<const Augmentation> Augmentation::ForEvaluation() const {
  AugmentOptions eval = options_;
  eval.kind = (options_.kind == "resize" || options_.kind == "rrc-flip") && options_.resize > 0
                  ? "resize"
                  : "none";
  return std::make_shared<const Augmentation>(eval);
}

}  // namespace mgpu
