#include "data/device_resident_batches.h"

#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "common/status.h"
#include "data/batch_loader.h"

#ifdef MGPU_HAS_GATHER_KERNEL
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "data/kernels/gather_kernels.h"
#endif

namespace mgpu {

DeviceResidentBatches::DeviceResidentBatches(const ImageDataset& dataset, int64_t batch_size, torch::Device device,
                                             bool channels_last)
    : batch_size_(batch_size), device_(device), channels_last_(channels_last) {
  if (batch_size < 1) throw std::invalid_argument("batch_size must be at least 1");
  try {
    images_ = dataset.images.to(device_).contiguous();
    labels_ = dataset.labels.to(device_);
  } catch (const c10::OutOfMemoryError& e) {
    throw BadInputError(fmt::format(
        "--data-on-device: the training set {} ({:.2f} GiB as uint8 pixels) does not fit in the memory of {}; "
        "drop --data-on-device to stream batches from the host instead",
        dataset.name, static_cast<double>(dataset.images.nbytes()) / (1 << 30), device_.str()));
  }
  // As BatchLoader, in float32, so both paths round alike.
  std::tie(scale_, shift_) = PixelNormalization::Of(dataset.mean, dataset.stddev).On(device_);
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
  batch.images = device_.is_cuda() ? GatherByKernel(indices) : GatherByAten(indices);  // (B, C, H, W)
  batch.labels = labels_.index_select(0, indices);                                     // (B)
  return batch;
}

torch::Tensor DeviceResidentBatches::GatherByAten(const torch::Tensor& indices) const {
  // Multiply, then add, as two roundings, as BatchLoader's loop does. The uint8 pixels convert
  // to float32 exactly inside the multiplication (type promotion), which saves a conversion
  // kernel and rounds as converting first would.
  const torch::Tensor images = images_.index_select(0, indices).mul(scale_).add_(shift_);
  return channels_last_ ? images.contiguous(torch::MemoryFormat::ChannelsLast) : images;
}

#ifdef MGPU_HAS_GATHER_KERNEL
torch::Tensor DeviceResidentBatches::GatherByKernel(const torch::Tensor& indices) const {
  const int64_t channels = images_.size(1), height = images_.size(2), width = images_.size(3);
  if (!kernels::GatherFits(channels, height, width)) return GatherByAten(indices);
  const c10::cuda::CUDAGuard on_device(device_);
  const kernels::GatherShape s{images_.size(0), indices.size(0), static_cast<int32_t>(channels),
                               static_cast<int32_t>(height * width), channels_last_};
  torch::Tensor images = torch::empty(
      {s.batch, channels, height, width},
      scale_.options().memory_format(channels_last_ ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous));
  const torch::Tensor indices_here = indices.to(device_, torch::kInt64).contiguous();
  C10_CUDA_CHECK(kernels::LaunchGatherNormalized(s, images_.data_ptr<uint8_t>(), indices_here.data_ptr<int64_t>(),
                                                 scale_.data_ptr<float>(), shift_.data_ptr<float>(),
                                                 images.data_ptr<float>(), at::cuda::getCurrentCUDAStream()));
  return images;
}
#else
torch::Tensor DeviceResidentBatches::GatherByKernel(const torch::Tensor& indices) const {
  return GatherByAten(indices);  // a CUDA build without nvcc (scripts/setup.sh provides it)
}
#endif

int64_t DeviceResidentBatches::device_bytes() const {
  return static_cast<int64_t>(images_.nbytes() + labels_.nbytes());
}

}  // namespace mgpu
