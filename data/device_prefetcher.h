// Hands out a BatchLoader's batches already on the training device, copying batch n+1 while
// the model computes on batch n.
//
// On a CUDA device each batch (pinned by the loader) is copied with non_blocking=true on a
// side stream, and an event recorded after the copy; Next() makes the compute stream wait on
// that event on the GPU (no host synchronization) and tells the caching allocator that the
// compute stream uses the batch's memory (recordStream), then starts the next copy. On the CPU
// the loader's normalized batches pass through unchanged.
//
// A loader of BatchPixels::kRaw hands out uint8 batches; the prefetcher normalizes them on the
// device, after the copy on the side stream (on the CPU, in Next()), with the loader's
// PixelNormalization: the same float32 values as the loader's own normalization.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "data/batch_loader.h"
#include "data/batch_source.h"

namespace mgpu {

class DevicePrefetcher : public BatchSource {
 public:
  // `loader` must outlive the prefetcher.
  DevicePrefetcher(BatchLoader& loader, torch::Device device);
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // As BatchLoader::StartEpoch; drops a batch copied ahead for an unfinished pass.
  void StartEpoch(std::vector<int64_t> indices, int64_t epoch) override;
  // The next batch on the device (images (B, C, H, W), labels (B)), or nullopt at the pass's end.
  std::optional<Batch> Next() override;

 private:
  struct InFlight;  // a batch being copied, and its copy's event (CUDA only)
  std::unique_ptr<InFlight> CopyAhead(std::optional<Batch> host);
  // `images` as normalized float32 where they are uint8 (BatchPixels::kRaw); else unchanged.
  torch::Tensor Normalized(const torch::Tensor& images) const;

  BatchLoader& loader_;
  torch::Device device_;
  std::optional<c10::Stream> side_stream_;  // CUDA: the copies' stream
  torch::Tensor scale_, shift_;             // (1, C, 1, 1) float32 on device_: the loader's normalization
  bool pass_started_ = false;  // the pass's first batch was requested
  std::unique_ptr<InFlight> ahead_;
};

}  // namespace mgpu
