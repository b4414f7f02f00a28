// The training set kept on the training device (--data-on-device): uploaded once as uint8
// pixels, and each batch gathered, converted and normalized there, so a step costs no host
// work and no host-to-device copy beyond the epoch's index list.
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
  std::optional<Batch> Next() override;

  // Bytes the data set occupies on the device.
  int64_t device_bytes() const;

 private:
  int64_t batch_size_;
  torch::Device device_;
  torch::Tensor images_;  // (N, C, H, W) uint8 on device_
  torch::Tensor labels_;  // (N) int64 on device_
  torch::Tensor scale_;   // (1, C, 1, 1) float32: 1 / (255 * stddev)
  torch::Tensor shift_;   // (1, C, 1, 1) float32: -mean / stddev
  torch::Tensor order_;   // (M) int64 on device_: this pass's indices
  int64_t next_ = 0;      // position in order_ of the next batch's first sample
};

}  // namespace mgpu
