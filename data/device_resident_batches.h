// The training set kept on the training device (--data-on-device): uploaded once as uint8
// pixels, and each batch gathered, converted, normalized and laid out in the step's memory format
// there, so a step costs no host work and no host-to-device copy beyond the epoch's index list.
// On a GPU that is one kernel per batch (data/kernels/gather_kernels.h) besides the labels'
// gather; on the CPU, ATen's index_select, mul and add_ (and the channels-last copy).
//
// Batches equal BatchLoader's for the same indices (same normalization: pixel / 255, minus the
// mean, over the standard deviation, per channel, the same two roundings), bit for bit. There is
// no per-sample augmentation: the data set must be used as stored.
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
  // Uploads `dataset`'s images and labels to `device`; batches' images are channels-last where
  // `channels_last` (the model's format, --channels-last), contiguous NCHW otherwise. Throws
  // BadInputError, naming the size, when they do not fit in the device's memory, and
  // std::invalid_argument for batch_size < 1.
  DeviceResidentBatches(const ImageDataset& dataset, int64_t batch_size, torch::Device device, bool channels_last);

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

 private:
  // The (B, C, H, W) images of `indices` by ATen's operations (the CPU's way).
  torch::Tensor GatherByAten(const torch::Tensor& indices) const;
  // The same in one CUDA kernel.
  torch::Tensor GatherByKernel(const torch::Tensor& indices) const;

  int64_t batch_size_;
  torch::Device device_;
  bool channels_last_;
  torch::Tensor images_;  // (N, C, H, W) uint8 on device_, contiguous
  torch::Tensor labels_;  // (N) int64 on device_
  torch::Tensor scale_;   // (1, C, 1, 1) float32 on device_: 1 / (255 * stddev)
  torch::Tensor shift_;   // (1, C, 1, 1) float32 on device_: -mean / stddev
  torch::Tensor order_;   // (M) int64 on device_: this pass's indices
  int64_t next_ = 0;      // position in order_ of the next batch's first sample
  bool defer_gather_ = false;
};

}  // namespace mgpu
