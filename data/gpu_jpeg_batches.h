// `--decode gpu`: a streamed JPEG data set's batches decoded by nvJPEG on the training device.
//
// One producer thread builds the batches of a pass in order, up to kBatchesAhead ahead of the
// training loop. For each batch:
//   1. on the CPU (the producer plus num_workers - 1 helper threads): read each sample's bytes,
//      parse its JPEG header (data/jpeg_header.h) and draw its crop with the same random draws as
//      the CPU path (StreamingImages::PlanCrop), so a sample is the same crop whichever decoder
//      runs; samples nvJPEG does not take (PNG, progressive, CMYK, 4:1:1, > kMaxGpuPixels, bad
//      headers) are decoded there by the CPU path, --on-bad-image applying as always;
//   2. on a side stream of the device: nvJPEG's batched decode (the hardware JPEG engine where the
//      GPU has one, with region-of-interest decoding of just the crop; else the GPU-assisted
//      backend and a full decode), in chunks whose output stays under kDecodeBufferBytes; then,
//      per image, LibTorch's antialiased bilinear resize of the crop to side x side (rounded to
//      whole 8-bit levels, as the CPU path stores them), the flip, and the batch's normalization.
//      A chunk nvJPEG refuses (a corrupt stream) is decoded by the CPU path instead.
// The producer waits for the side stream before handing a batch out, so a batch is complete when
// Next() returns it; Next() tells the caching allocator that the compute stream uses it.
//
// Device memory: at most kBatchesAhead + 2 float batches (B x 3 x side x side x 4 bytes: those
// waiting, the one being built, the one the step holds), one
// decode chunk's buffer (<= kDecodeBufferBytes, or one image of <= 3 x kMaxGpuPixels bytes), and
// nvJPEG's own state; MemoryBoundBytes() says how much, for the start-up table.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "data/batch_source.h"
#include "data/streaming_images.h"

namespace mgpu {

struct GpuDecodeStats {
  int64_t gpu_images = 0;                        // decoded by nvJPEG
  int64_t cpu_fallbacks = 0;                     // decoded by the CPU path instead
  std::map<std::string, int64_t> fallback_reasons;  // RouteName() or "nvjpeg_error" -> count
};

class GpuJpegBatches : public BatchSource {
 public:
  static constexpr int kBatchesAhead = 2;
  static constexpr int64_t kDecodeBufferBytes = int64_t{512} << 20;

  // `device` must be a CUDA device. Throws BadInputError where nvJPEG is missing (compiled out,
  // or libnvjpeg not found) or refuses to start, naming what to install.
  GpuJpegBatches(std::shared_ptr<const StreamingImages> source, torch::Device device, int64_t batch_size,
                 int num_workers);
  ~GpuJpegBatches() override;
  GpuJpegBatches(const GpuJpegBatches&) = delete;
  GpuJpegBatches& operator=(const GpuJpegBatches&) = delete;

  void StartEpoch(std::vector<int64_t> indices, int64_t epoch) override;
  // Rethrows the producer's exception (e.g. BadInputError for a bad image under fail).
  std::optional<Batch> Next() override;

  GpuDecodeStats stats() const;
  // For the start-up table: "nvJPEG 13.0.1, hardware backend, region decode".
  std::string Describe() const;
  int64_t MemoryBoundBytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgpu
