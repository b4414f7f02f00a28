// `--decode gpu`: a streamed JPEG data set's batches decoded by nvJPEG on the training device.
//
// One producer thread hands out the batches of a pass in order, up to kBatchesAhead ahead of the
// training loop. For each batch:
//   1. on the CPU (num_workers threads, working one batch ahead of the device): read each sample's
//      bytes, parse its JPEG header (data/jpeg_header.h) and draw its crop with the same random
//      draws as the CPU path (StreamingImages::PlanCrop), so a sample is the same crop whichever
//      decoder runs; samples nvJPEG does not take (PNG, progressive, CMYK, 4:1:1, > kMaxGpuPixels,
//      bad headers) are decoded there by the CPU path, --on-bad-image applying as always. Then,
//      until the device has made the previous batch's nvJPEG calls, the same threads decode
//      samples of this batch by the CPU path, from its end (CpuAssist): the device leaves them out;
//   2. on the device, in chunks of kChunkImages (data/nvjpeg_decoder.h), nvJPEG's calls on a
//      decode stream of their own and the rest on a side stream that waits for each chunk:
//      nvJPEG's batched decode by the GPU's JPEG engines where it has them (region-of-interest
//      decoding of just the crop), else by the CUDA (GPU-hybrid) backend with full decodes. Each
//      chunk's crops are resized into their places in the batch by one kernel (data/crop_resize.h:
//      LibTorch's antialiased bilinear resize, rounded to whole 8-bit levels as the CPU path
//      stores them, flipped, normalized, and written in the model's memory format, so that
//      neither a normalization pass nor the step's layout copy reads the batch again); the CPU
//      path's samples are copied in from the pinned host batch, normalized on the way. A chunk
//      nvJPEG refuses (a corrupt stream) is retried image by image, and
//      what it still refuses is decoded by the CPU path. (The CUDA decoder taking a share of each
//      batch beside the engines, as DALI's hw_decoder_load does, was measured: 1x H100,
//      2026-11-26, decode only, the engines alone 9,900 img/s, the CUDA decoder alone 3,900, the
//      two sharing 5,700.)
// The producer thread is what limits a fast model: nvJPEG's hardware call blocks until its chunk
// is decoded, and per image it makes a pageable copy of the bitstream, launches a conversion kernel
// on a stream of its own (which waits behind the training's kernels) and records and waits for an
// event: about 80 us of the calling thread an image beside ResNet-18's training, 1x H100
// (bench/results/2026-11-27-1xH100-crop-resize-kernel/, nvJPEG's pipeline on). The CPU assist takes a
// fifth to a quarter of each batch off it: ResNet-18 at 224 trains at 84-92% of its synthetic rate
// by machine (the slower hosts' decode waits in every step), ResNet-50 at 96%
// (bench/results/2026-11-27-2xH100-nvjpeg-no-pipeline/, 2026-11-28-2xH100-decode-normalize-in-resize/;
// normalizing in the resize kernel, into the model's layout, gained 2-6% on one GPU, 6-12% in three of
// four DDP pairs).
// Under DDP the conversion kernel also queued behind NCCL's kernels, which share the driver's 8
// hardware work queues by default: DDP trained 7-21% slower than once the worker asked for 32
// (worker/cuda_work_queues.h; ResNet-18 on 2 GPUs then 68-91% of synthetic, by machine).
// Measured and not kept: enqueuing the resizes from another thread, handing a batch on before its
// resizes have run (bench/results/2026-11-26-1xH100-decode-assist/, and for DDP -ddp-decode-diagnosis/),
// high-priority streams, more batches ahead, bigger chunks, other output formats, pinned bitstreams,
// bitstreams on the device (NVJPEG_BACKEND_HARDWARE_DEVICE: half the rate), the CPU assist running on
// until the producer takes its batch (the assisted share did not grow: 2026-11-28-2xH100-decode-normalize-in-resize/).
// The producer waits (polling, not spinning) for the device before handing a batch out, so a
// batch is complete when Next() returns it; Next() tells the caching allocator that the compute
// stream uses it.
//
// Device memory: at most kBatchesAhead + 4 float batches (B x 3 x side x side x 4 bytes: those
// waiting, the one being built, the one the step holds, the CPU path's samples on their way in),
// the decoded chunks kept until the resizes have read them (at most kRetainedChunkBytes and one
// more chunk), in a build without the resize kernel one crop's float copy (4 chunks' bytes), and
// nvJPEG's own state;
// MemoryBoundBytes() says how much, for the start-up table.
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
  int64_t cpu_assisted = 0;                      // nvJPEG's, decoded by the CPU threads beside it (CpuAssist)
  int64_t cpu_fallbacks = 0;                     // decoded by the CPU path instead
  std::map<std::string, int64_t> fallback_reasons;  // RouteName() or "nvjpeg_error" -> count
};

// Which nvJPEG backend decodes.
enum class GpuDecoderChoice {
  kFastest,   // the first that starts of hardware (the GPU's JPEG engines), GPU-hybrid, default
  kCudaOnly,  // GPU-hybrid or default: the CUDA decoder, as on GPUs without JPEG engines (tests)
};

// Whether the CPU threads, once a batch is prepared, decode some of its samples by the CPU path
// while the device decodes the batch before it. Pixels of one sample then differ by the two
// decoders' tolerance depending on which one ran (the crop is the same).
enum class CpuAssist {
  kWhileDeviceBusy,  // until the device has enqueued the previous batch's decodes
  kOff,              // the device decodes every sample it can (same pixels run to run)
  kEverySample,      // the CPU path decodes every sample it can, the device the rest (tests)
};

class GpuJpegBatches : public BatchSource {
 public:
  static constexpr int kBatchesAhead = 2;
  // A chunk: what one nvJPEG call decodes, bounded in output bytes (full-size decodes, an upper
  // bound). At least 51 images: the GPU-hybrid backend decodes Huffman on the GPU above 50.
  static constexpr int64_t kChunkImages = 64;
  static constexpr int64_t kDecodeBufferBytes = int64_t{64} << 20;
  // Decoded chunks kept at most (more waits for the resizes that read them): four chunks of
  // ImageNet-sized photos hold a batch of 256, so only batches of large images wait.
  static constexpr int64_t kRetainedChunkBytes = 4 * kDecodeBufferBytes;

  // `device` must be a CUDA device. Batches are (B, 3, side, side) float32 in `memory_format`
  // (contiguous NCHW or channels-last: the model's). Throws BadInputError where nvJPEG is missing
  // (compiled out, or libnvjpeg not found) or refuses to start, naming what to install.
  GpuJpegBatches(std::shared_ptr<const StreamingImages> source, torch::Device device, int64_t batch_size,
                 int num_workers, GpuDecoderChoice choice = GpuDecoderChoice::kFastest,
                 CpuAssist assist = CpuAssist::kWhileDeviceBusy,
                 torch::MemoryFormat memory_format = torch::MemoryFormat::Contiguous);
  ~GpuJpegBatches() override;
  GpuJpegBatches(const GpuJpegBatches&) = delete;
  GpuJpegBatches& operator=(const GpuJpegBatches&) = delete;

  void StartEpoch(std::vector<int64_t> indices, int64_t epoch) override;
  // Rethrows the producer's exception (e.g. BadInputError for a bad image under fail).
  std::optional<Batch> Next() override;

  GpuDecodeStats stats() const;
  // For the start-up table: "nvJPEG 13.0.4, hardware (...) backend, region-of-interest decode of
  // each crop, CPU assist on".
  std::string Describe() const;
  int64_t MemoryBoundBytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgpu
