// What `--decode gpu` needs to know of an encoded image before the device sees it: its format,
// size and JPEG coding, read from the header alone (libjpeg-turbo's jpeg_read_header, no pixel
// decoded), and whether nvJPEG's batched decode takes it or the CPU path must
// (data/gpu_jpeg_batches.h). Cheap enough for every sample of every batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image_ops.h"

namespace mgpu {

struct JpegHeader {
  bool is_jpeg = false;     // starts with a JPEG SOI marker and its header parses
  std::string error;        // why the header did not parse ("" when it did, or not a JPEG)
  ImageSize size;           // (height, width) of the full image
  int components = 0;       // 1 grayscale, 3 YCbCr/RGB, 4 CMYK/YCCK
  bool progressive = false;
  bool cmyk = false;        // Adobe CMYK or YCCK
  int max_h_sampling = 1;   // the largest horizontal / vertical sampling factor of any component
  int max_v_sampling = 1;   //   (2 x 2 with chroma at 1 x 1: 4:2:0)
  int luma_h_sampling = 1;  // component 0's factors
  int luma_v_sampling = 1;
};

// Parses the header of `size` bytes. Never throws: a non-JPEG gives is_jpeg = false and an
// empty error, a corrupt header is_jpeg = false and libjpeg's message.
JpegHeader ReadJpegHeader(const uint8_t* bytes, size_t size);

// Why a sample goes to the CPU decoder instead of nvJPEG.
enum class GpuDecodeRoute {
  kGpu,             // baseline (or extended) sequential JPEG, gray or YCbCr, within kMaxGpuPixels
  kNotJpeg,         // PNG, or anything else the CPU path reads (or reports as unreadable)
  kBadHeader,       // the CPU path reports the error with its usual message
  kProgressive,     // the hardware engine and the batched GPU path take one scan only
  kCmyk,            // four components
  kUnusualSampling, // e.g. 4:1:1, 4:1:0: not in nvJPEG's hardware engine
  kTooLarge,        // more pixels than kMaxGpuPixels: the device buffer stays bounded
};

// The largest image (pixels, full size) nvJPEG decodes; larger ones take the CPU path, so the
// decode buffer is bounded by batch x 3 x kMaxGpuPixels bytes.
constexpr int64_t kMaxGpuPixels = int64_t{16} << 20;  // 16 Mpixel, e.g. 4896 x 3264

GpuDecodeRoute RouteForGpu(const JpegHeader& header);
// For summary.json and the log: "progressive", "cmyk", ...; "gpu" for kGpu.
const char* RouteName(GpuDecodeRoute route);

}  // namespace mgpu
