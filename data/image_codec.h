// Decodes JPEG (libjpeg-turbo) and PNG (libpng) files into 8-bit RGB. The format is taken from
// the file's first bytes, not its name. Grayscale, palette and 16-bit PNGs and grayscale JPEGs
// become RGB; alpha is dropped. Truncated or corrupt data is an error, not a partly grey image
// (libjpeg's "premature end of data" warnings count as errors, as in PIL).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> rgb;  // (H, W, 3) interleaved
};

// Throws BadInputError naming `path` and what is wrong.
DecodedImage DecodeImageFile(const std::string& path);

}  // namespace mgpu
