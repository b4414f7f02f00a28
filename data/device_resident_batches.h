// The training set kept on the training device (--data-on-device): uploaded once as uint8
// pixels, and each batch gathered, converted and normalized there, so a step costs no host
// work and no host-to-device copy beyond the epoch's index list. On a GPU where the normalized
// float32 set takes at most 1/8 of the memory (MNIST-sized sets on any current card), the
// pixels are normalized once at upload instead, and a batch is two gathers.
//
// Batches equal BatchLoader's for the same indices (same normalization: pixel / 255, minus the
// mean, over the standard deviation, per channel), up to float rounding. There is no per-sample
// augmentation: the data set must be used as stored.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "data/batch_source.h"
#include "data/image_dataset.h"

namespace mgpu {

class DeviceResidentBatches : public BatchSource {
 public:
  // Uploads `dataset`'s images and labels to `device`. Throws BadInputError, naming the size,
  // when they do not fit in the device's memory, and std::invalid_argument for batch_size < 1.
  DeviceResidentBatches(const ImageDataset& dataset, int64_t batch_size, torch::Device device);

  void StartEpoch(std::vector<int64_t> indices, int64_t epoch) override;
  // The pass's next batch; after DeferGather(), only its sample_indices (no device work).
  std::optional<Batch> Next() override;

  // From now on Next() leaves images and labels out and hands over the batch's sample indices,
  // for the caller to Gather() where it suits it: inside a captured CUDA graph (the --cuda-graphs
  // step), so that a replayed step costs the host one copy of B indices instead of a kernel
  // launch per gather and conversion.
  void DeferGather() { defer_gather_ = true; }
  // The images and labels of the samples at `indices` ((B) int64 on the device), as Next()
  // returns them. Queues device work only (no host synchronization, no allocation that depends
  // on the values), so a CUDA graph can capture it.
  Batch Gather(const torch::Tensor& indices) const;

  // Bytes the data set occupies on the device.
  int64_t device_bytes() const;
  // Whether the pixels were normalized once at upload (float32 on the device).
  bool normalized_once() const { return normalized_once_; }

 private:
  // (N or B, C, H, W) uint8 pixels as normalized float32 batches.
  torch::Tensor Normalize(const torch::Tensor& pixels) const;

  int64_t batch_size_;
  torch::Device device_;
  torch::Tensor images_;  // (N, C, H, W) on device_: uint8, or float32 normalized when normalized_once_
  torch::Tensor labels_;  // (N) int64 on device_
  torch::Tensor scale_;   // (1, C, 1, 1) float32: 1 / (255 * stddev)
  torch::Tensor shift_;   // (1, C, 1, 1) float32: -mean / stddev
  torch::Tensor order_;   // (M) int64 on device_: this pass's indices
  int64_t next_ = 0;      // position in order_ of the next batch's first sample
  bool defer_gather_ = false;
  bool normalized_once_ = false;
};

}  // namespace mgpu
