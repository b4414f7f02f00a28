#include "data/device_prefetcher.h"

#include <tuple>

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mgpu {

struct DevicePrefetcher::InFlight {
  Batch batch;
#ifdef MGPU_WITH_CUDA
  c10::cuda::CUDAEvent copied;
#endif
};

DevicePrefetcher::DevicePrefetcher(BatchLoader& loader, torch::Device device) : loader_(loader), device_(device) {
  std::tie(scale_, shift_) = loader_.normalization().On(device_);
#ifdef MGPU_WITH_CUDA
  if (device_.is_cuda()) side_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
#endif
}

DevicePrefetcher::~DevicePrefetcher() = default;

void DevicePrefetcher::StartEpoch(std::vector<int64_t> indices, int64_t epoch) {
  ahead_.reset();
  pass_started_ = false;
  loader_.StartEpoch(std::move(indices), epoch);
}

std::optional<Batch> DevicePrefetcher::Next() {
#ifdef MGPU_WITH_CUDA
  if (device_.is_cuda()) {
    if (!pass_started_) {
      ahead_ = CopyAhead(loader_.Next());
      pass_started_ = true;
    }
    if (!ahead_) return std::nullopt;
    std::unique_ptr<InFlight> ready = std::move(ahead_);
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
    ready->copied.block(compute);
    // Allocated on the side stream, used on the compute stream: not to be reused before that is done.
    c10::cuda::CUDACachingAllocator::recordStream(ready->batch.images.storage().data_ptr(), compute);
    c10::cuda::CUDACachingAllocator::recordStream(ready->batch.labels.storage().data_ptr(), compute);
    ahead_ = CopyAhead(loader_.Next());
    return std::move(ready->batch);
  }
#endif
  std::optional<Batch> batch = loader_.Next();
  if (batch) batch->images = Normalized(batch->images);
  return batch;
}

torch::Tensor DevicePrefetcher::Normalized(const torch::Tensor& images) const {
  if (images.scalar_type() != torch::kUInt8) return images;
  // uint8 times float32 is float32: two passes, the first reading the bytes themselves.
  return torch::mul(images, scale_).add_(shift_);
}

std::unique_ptr<DevicePrefetcher::InFlight> DevicePrefetcher::CopyAhead(std::optional<Batch> host) {
  if (!host) return nullptr;
  auto in_flight = std::make_unique<InFlight>();
  in_flight->batch.index = host->index;
#ifdef MGPU_WITH_CUDA
  const c10::cuda::CUDAStream side(c10::cuda::CUDAStream::UNCHECKED, *side_stream_);
  c10::cuda::CUDAStreamGuard on_side(side);
  // Pinned host memory: the copies return at once, and the host allocator keeps the pages until
  // they are done.
  in_flight->batch.images = Normalized(host->images.to(device_, /*non_blocking=*/true));
  in_flight->batch.labels = host->labels.to(device_, /*non_blocking=*/true);
  in_flight->copied.record(side);
#endif
  return in_flight;
}

}  // namespace mgpu
