#include "data/device_resident_batches.h"

#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "common/status.h"
#include "data/batch_loader.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#endif

namespace mgpu {
namespace {

// Normalizing once at upload trades 4x the pixels' memory for two kernels less per step; worth
// it where that stays a small part of the GPU's memory. Never on the CPU, whose batches are
// made as before.
constexpr int64_t kNormalizedShareOfMemory = 8;  // at most total / this

bool FitsNormalized(const ImageDataset& dataset, const torch::Device& device) {
#ifdef MGPU_WITH_CUDA
  if (!device.is_cuda()) return false;
  c10::cuda::CUDAGuard on_device(device);
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const auto normalized_bytes = static_cast<int64_t>(dataset.images.numel() * sizeof(float));
  return normalized_bytes <= static_cast<int64_t>(total) / kNormalizedShareOfMemory &&
         normalized_bytes <= static_cast<int64_t>(free) / 2;
#else
  (void)dataset, (void)device;
  return false;
#endif
}

}  // namespace

DeviceResidentBatches::DeviceResidentBatches(const ImageDataset& dataset, int64_t batch_size, torch::Device device)
    : batch_size_(batch_size), device_(device) {
  if (batch_size < 1) throw std::invalid_argument("batch_size must be at least 1");
  try {
    images_ = dataset.images.to(device_);
    labels_ = dataset.labels.to(device_);
  } catch (const c10::OutOfMemoryError& e) {
    throw BadInputError(fmt::format(
        "--data-on-device: the training set {} ({:.2f} GiB as uint8 pixels) does not fit in the memory of {}; "
        "drop --data-on-device to stream batches from the host instead",
        dataset.name, static_cast<double>(dataset.images.nbytes()) / (1 << 30), device_.str()));
  }
  // As BatchLoader, in float32, so both paths round alike.
  std::tie(scale_, shift_) = PixelNormalization::Of(dataset.mean, dataset.stddev).On(device_);
  if (FitsNormalized(dataset, device_)) {
    // Each pixel once, with the same operations Gather applies per batch, so batches are the same.
    images_ = Normalize(images_);
    normalized_once_ = true;
  }
}

torch::Tensor DeviceResidentBatches::Normalize(const torch::Tensor& pixels) const {
  // Multiply, then add, as two roundings, as BatchLoader's loop does. The uint8 pixels convert
  // to float32 exactly inside the multiplication (type promotion), which saves a conversion
  // kernel and rounds as converting first would.
  return pixels.mul(scale_).add_(shift_);
}

void DeviceResidentBatches::StartEpoch(std::vector<int64_t> indices, int64_t /*epoch*/) {
  order_ = torch::tensor(indices, torch::kInt64).to(device_, /*non_blocking=*/false);
  next_ = 0;
}

std::optional<Batch> DeviceResidentBatches::Next() {
  if (!order_.defined() || next_ >= order_.size(0)) return std::nullopt;
  const int64_t count = std::min(batch_size_, order_.size(0) - next_);
  const torch::Tensor picked = order_.narrow(0, next_, count);  // (B)
  Batch batch;
  if (defer_gather_) {
    batch.sample_indices = picked;
  } else {
    batch = Gather(picked);
  }
  batch.index = next_ / batch_size_;
  next_ += count;
  return batch;
}

Batch DeviceResidentBatches::Gather(const torch::Tensor& indices) const {
  Batch batch;
  batch.images = images_.index_select(0, indices);  // (B, C, H, W)
  if (!normalized_once_) batch.images = Normalize(batch.images);
  batch.labels = labels_.index_select(0, indices);  // (B)
  return batch;
}

int64_t DeviceResidentBatches::device_bytes() const {
  return static_cast<int64_t>(images_.nbytes() + labels_.nbytes());
}

}  // namespace mgpu
