// Where the training loop takes its batches from: an epoch is a list of sample indices, handed
// out as batches in order, already on the training device.
//
// Implementations: DevicePrefetcher (a BatchLoader's host batches, copied ahead to the device)
// and DeviceResidentBatches (the whole training set kept on the device, --data-on-device).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/batch_loader.h"

namespace mgpu {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Starts a pass over `indices` (the last batch may be smaller); an unfinished previous pass
  // is abandoned. `epoch` keys any random augmentation.
  virtual void StartEpoch(std::vector<int64_t> indices, int64_t epoch) = 0;
  // The pass's next batch (images (B, C, H, W) float32, labels (B) int64), or nullopt at its end.
  virtual std::optional<Batch> Next() = 0;
};

}  // namespace mgpu
