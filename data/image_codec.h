// Decodes JPEG (libjpeg-turbo) and PNG (libpng) files into 8-bit RGB. The format is taken from
// the file's first bytes, not its name. Grayscale, palette and 16-bit PNGs and grayscale JPEGs
// become RGB; alpha is dropped. Truncated or corrupt data is an error, not a partly grey image
// (libjpeg's "premature end of data" warnings count as errors, as in PIL).
//
// DecodeImageRegion serves the streaming loader: it decodes only the part of an image a crop
// needs, and, for JPEGs, at the smallest DCT scale of 1/8, 1/4, 1/2, 1 that still gives the crop
// enough pixels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/image_ops.h"

namespace mgpu {

struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb;  // (H, W, 3) interleaved
};

// Throws BadInputError naming `path` and what is wrong.
DecodedImage DecodeImageFile(const std::string& path);
// The same for an image already in memory; `name` (a path, or a tar member's place) is for
// messages.
DecodedImage DecodeImageBytes(const uint8_t* bytes, size_t size, const std::string& name);

struct DecodedRegion {
  DecodedImage image;  // the rows and columns of the image around `window`, maybe downscaled
  Window window;       // the chosen region, in `image`'s pixels
};

// Decodes the region that `pick` chooses from the full image's (height, width), at the lowest
// resolution that keeps that region at least `min_size` pixels: a JPEG is scaled by m/8
// (m = 1..8) in libjpeg-turbo's DCT and only the region's rows and (iMCU-aligned) columns are
// decoded; a PNG is decoded whole. `pick` must not throw (it runs between libjpeg's setjmp and
// longjmp). Scaling rounds the region's edges to whole pixels of the scaled image: at most one
// pixel, i.e. under 1/min_size of the region. Throws BadInputError like DecodeImageFile; corrupt
// data outside the decoded rows may go unnoticed.
DecodedRegion DecodeImageRegion(const uint8_t* bytes, size_t size, const std::string& name,
                                const std::function<Window(ImageSize)>& pick, ImageSize min_size);

}  // namespace mgpu
