// JPEG (libjpeg-turbo) and PNG (libpng) headers and decoding: data/image_codec.h, the whole-image
// decode of the in-memory loader and the scaled, cropped region decode of the streaming loader.
// Built twice, as fuzz_jpeg and fuzz_png: MGPU_FUZZ_SIGNATURE is put in front of an input that
// lacks it, so each target spends its time inside its own decoder.
#include <algorithm>
#include <cstring>
#include <vector>

#include "data/image_codec.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string signature = MGPU_FUZZ_SIGNATURE;
  std::vector<uint8_t> bytes(data, data + size);
  if (size < signature.size() || std::memcmp(data, signature.data(), signature.size()) != 0) {
    bytes.insert(bytes.begin(), signature.begin(), signature.end());
  }
  mgpu::fuzz::ExpectParsedOrRefused([&] { mgpu::DecodeImageBytes(bytes.data(), bytes.size(), "image"); });
  mgpu::fuzz::ExpectParsedOrRefused([&] {
    // The centre half of the image, decoded at the smallest scale that keeps it 16 pixels a side.
    const auto pick = [](mgpu::ImageSize full) {
      return mgpu::Window{full.height / 4, full.width / 4, std::max<int64_t>(1, full.height / 2),
                          std::max<int64_t>(1, full.width / 2)};
    };
    mgpu::DecodeImageRegion(bytes.data(), bytes.size(), "image", pick, mgpu::ImageSize{16, 16});
  });
  return 0;
}
