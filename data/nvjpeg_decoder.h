// One nvJPEG backend's batched decoder (data/gpu_jpeg_batches.h's device side): a handle, its
// decode state and region parameters, used by one thread at a time.
//
// Decode() takes a chunk of JPEGs already routed to the GPU (data/jpeg_header.h) with each one's
// crop window, and enqueues their decode on a stream into one uint8 buffer: with the hardware
// backend, just each window (region-of-interest decode); with the others, each full image, of
// which the crop is then a view. The caller orders its uses of the buffer after the stream's
// (on it, or through an event), and keeps the JPEGs' bytes alive until the stream has passed
// them. The hardware backend, which writes at the call rather than in stream order, first waits
// (on the host) for the stream.
//
// Every nvJPEG call decodes the same number of images, `call_images`: a shorter chunk is padded
// with a 16 x 16 JPEG decoded into a scratch buffer. A new count would mean a new
// nvjpegDecodeBatchedInitialize, which costs the hardware backend far more than decoding a
// chunk: on 1x H100 (2026-11-26), with chunks of varying size, decoding 256 images took about
// 180 ms instead of 20.
#pragma once

#if defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA)
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <torch/torch.h>

#include "data/image_ops.h"
#include "data/nvjpeg_library.h"

namespace mgpu {

// One JPEG of a chunk: its bytes (owned by the caller), full size and the window to crop.
struct EncodedCrop {
  const uint8_t* data = nullptr;
  size_t size = 0;
  ImageSize full;
  Window window;
};

// A chunk's decoded pixels: one flat uint8 buffer and where each crop lies in it.
struct DecodedChunk {
  torch::Tensor pixels;  // (total,) uint8 on the device, planar RGB per image
  struct Place {
    int64_t offset = 0;  // of the image's first plane
    int64_t height = 0;  // of the decoded planes (the window's, or the full image's)
    int64_t width = 0;
    Window crop;         // within the decoded planes
  };
  std::vector<Place> places;
};

// Waits on the host until `stream` has run everything enqueued on it, polling: the waiting thread
// spends no core spinning (cudaStreamSynchronize may spin).
void WaitForStream(cudaStream_t stream);

class NvjpegDecoder {
 public:
  // nullptr where nvJPEG cannot start `backend` on the current device. Chunks hold at most
  // `call_images` JPEGs.
  static std::unique_ptr<NvjpegDecoder> TryCreate(const NvjpegLibrary& lib, nvjpegBackend_t backend, int call_images);
  ~NvjpegDecoder();
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  // Enqueues the chunk's decode on `stream` (the current device's), into `out`; false if nvJPEG
  // refused the chunk (a stream its header did not show to be bad). A hardware decoder that finds
  // region decoding refused falls back to full decodes from then on. Throws std::logic_error for
  // a chunk of more than `call_images` JPEGs.
  bool Decode(const std::vector<EncodedCrop>& chunk, cudaStream_t stream, DecodedChunk& out);

  nvjpegBackend_t backend() const { return backend_; }
  // "hardware (the GPU's JPEG engines) backend, region-of-interest decode of each crop"
  std::string Describe() const;

 private:
  NvjpegDecoder(const NvjpegLibrary& lib, nvjpegBackend_t backend, nvjpegHandle_t handle, nvjpegJpegState_t state,
                int call_images);
  bool DecodeAll(const std::vector<EncodedCrop>& chunk, bool region, cudaStream_t stream, DecodedChunk& out);
  bool EnsureRegionParams(size_t n);

  const NvjpegLibrary& lib_;
  const nvjpegBackend_t backend_;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  std::atomic<bool> region_decode_{false};  // read by Describe() on other threads
  const int call_images_;
  bool initialized_ = false;  // nvjpegDecodeBatchedInitialize was given call_images_
  std::vector<nvjpegDecodeParams_t> params_;
  std::vector<unsigned char> padding_;  // the 16 x 16 JPEG that fills short chunks
  torch::Tensor padding_out_;           // (call_images x 3 x 16 x 16) uint8 on the device: its outputs
};

}  // namespace mgpu
#endif
