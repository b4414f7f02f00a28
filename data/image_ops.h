// Pixel operations on one uint8 image stored channel-major, (C, H, W) contiguous: resampling,
// cropping, flipping and affine warps, as torchvision applies them. Pure functions of their
// arguments (no randomness, no global state), safe to call from any number of threads.
// Areas outside the source image read as 0 (torchvision's default fill).
#pragma once

#include <cstdint>

namespace mgpu {

struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const ImageSize& o) const { return height == o.height && width == o.width; }
};

// A rectangle in source-image pixel coordinates; it may extend past the image's borders.
struct Window {
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 0;
  int64_t width = 0;
};

enum class Interpolation { kNearest, kBilinear };

// Resamples `window` (which must lie inside the image) to `out_size`, with a triangle filter
// widened by the scale factor when shrinking (antialiased bilinear, as PIL and torchvision's
// `antialias=True`), in Pillow's fixed point: the result is PIL's Image.resize(BILINEAR) of the
// window to the bit. Equal sizes copy exactly. `out`: (C, out_size.height, out_size.width).
// `flip`: each output row mirrored, as FlipHorizontal would leave it, without a pass of its own.
void ResizeWindow(const uint8_t* in, int64_t channels, ImageSize size, Window window,
                  uint8_t* out, ImageSize out_size, bool flip);
// The same from an interleaved (H, W, C) image, as the decoders write it, without a transposed
// copy of the image first; `out` is channel-major all the same.
void ResizeWindowInterleaved(const uint8_t* in, int64_t channels, ImageSize size, Window window,
                             uint8_t* out, ImageSize out_size, bool flip);
// The whole image resized to `out_size`.
void ResizeBilinear(const uint8_t* in, int64_t channels, ImageSize size, uint8_t* out,
                    ImageSize out_size);

// Copies `window` to `out` (C, window.height, window.width), zeros where it leaves the image.
void Crop(const uint8_t* in, int64_t channels, ImageSize size, Window window, uint8_t* out);

// Mirrors each row in place.
void FlipHorizontal(uint8_t* pixels, int64_t channels, ImageSize size);

// torchvision's affine transform (F.affine) about the image centre, without shear: rotation
// by `angle_degrees` (clockwise as displayed), scaling, then a shift.
struct AffineParams {
  double angle_degrees = 0;
  double translate_x = 0;  // pixels, positive: right
  double translate_y = 0;  // pixels, positive: down
  double scale = 1;
};
// Each output pixel centre is mapped through the inverse transform into the source and sampled
// with `interpolation`. `out`: (C, H, W) like `in`. Identity parameters copy exactly.
void AffineWarp(const uint8_t* in, int64_t channels, ImageSize size, const AffineParams& params,
                Interpolation interpolation, uint8_t* out);

}  // namespace mgpu
