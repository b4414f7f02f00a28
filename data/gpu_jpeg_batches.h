// `--decode gpu`: a streamed JPEG data set's batches decoded by nvJPEG on the training device.
//
// One producer thread hands out the batches of a pass in order, up to kBatchesAhead ahead of the
// training loop. For each batch:
//   1. on the CPU (num_workers threads, working one batch ahead of the device): read each sample's
//      bytes, parse its JPEG header (data/jpeg_header.h) and draw its crop with the same random
//      draws as the CPU path (StreamingImages::PlanCrop), so a sample is the same crop whichever
//      decoder runs; samples nvJPEG does not take (PNG, progressive, CMYK, 4:1:1, > kMaxGpuPixels,
//      bad headers) are decoded there by the CPU path, --on-bad-image applying as always;
//   2. on a side stream of the device, in chunks of kChunkImages (data/nvjpeg_decoder.h):
//      nvJPEG's batched decode by the GPU's JPEG engines where it has them (region-of-interest
//      decoding of just the crop), else by the CUDA (GPU-hybrid) backend with full decodes. Each
//      crop is resized into its place in the batch by LibTorch's antialiased bilinear resize;
//      then, once per batch, the rounding to whole 8-bit levels (as the CPU path stores them), the
//      flips and the normalization. A chunk nvJPEG refuses (a corrupt stream) is retried image by
//      image, and what it still refuses is decoded by the CPU path. (The CUDA decoder taking a
//      share of each batch beside the engines, as DALI's hw_decoder_load does, was measured:
//      1x H100, 2026-11-26, decode only, the engines alone 9,900 img/s, the CUDA decoder alone
//      3,900, the two sharing 5,700.)
// The producer is what limits a fast model: nvJPEG's hardware call blocks until its chunk is
// decoded, 8-10 ms per 256 images alone and 16-21 ms beside ResNet-18's training (1x H100), so a
// batch takes 25-28 ms to build while the step takes 21.5. Two decoders in turn, two producer
// threads (their calls serialize), nvJPEG's pre-allocated pool or LibTorch's allocators did not
// change that (bench/results/2026-11-26-1xH100-decode-producer/).
// The producer waits (polling, not spinning) for the device before handing a batch out, so a
// batch is complete when Next() returns it; Next() tells the caching allocator that the compute
// stream uses it.
//
// Device memory: at most kBatchesAhead + 4 float batches (B x 3 x side x side x 4 bytes: those
// waiting, the one being built, the one the step holds, the flips' temporaries), one chunk's
// output and its float copy (5 x kDecodeBufferBytes, or 5 x 3 x kMaxGpuPixels bytes for one large
// image), and nvJPEG's own state; MemoryBoundBytes() says how much, for the start-up table.
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

// Which nvJPEG backend decodes.
enum class GpuDecoderChoice {
  kFastest,   // the first that starts of hardware (the GPU's JPEG engines), GPU-hybrid, default
  kCudaOnly,  // GPU-hybrid or default: the CUDA decoder, as on GPUs without JPEG engines (tests)
};

class GpuJpegBatches : public BatchSource {
 public:
  static constexpr int kBatchesAhead = 2;
  // A chunk: what one nvJPEG call decodes, bounded in output bytes (full-size decodes, an upper
  // bound). At least 51 images: the GPU-hybrid backend decodes Huffman on the GPU above 50.
  static constexpr int64_t kChunkImages = 64;
  static constexpr int64_t kDecodeBufferBytes = int64_t{64} << 20;

  // `device` must be a CUDA device. Throws BadInputError where nvJPEG is missing (compiled out,
  // or libnvjpeg not found) or refuses to start, naming what to install.
  GpuJpegBatches(std::shared_ptr<const StreamingImages> source, torch::Device device, int64_t batch_size,
                 int num_workers, GpuDecoderChoice choice = GpuDecoderChoice::kFastest);
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
