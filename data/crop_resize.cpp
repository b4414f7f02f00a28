#include "data/crop_resize.h"

#include <cstring>

#ifdef MGPU_HAS_CROP_RESIZE_KERNEL
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "data/kernels/crop_resize_kernels.h"
#endif

namespace mgpu {

namespace {

// The kernel reads and writes without bounds checks: a job must lie within the pixels and the batch.
void CheckJobs(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
               const torch::Tensor& batch) {
  TORCH_CHECK(pixels.scalar_type() == torch::kUInt8 && pixels.dim() == 1 && pixels.is_contiguous(),
              "ResizeCropsInto: pixels must be a contiguous (total) uint8 tensor");
  TORCH_CHECK(batch.scalar_type() == torch::kFloat32 && batch.dim() == 4 && batch.size(1) == 3 &&
                  batch.size(2) == batch.size(3) &&
                  (batch.is_contiguous() || batch.is_contiguous(torch::MemoryFormat::ChannelsLast)) &&
                  batch.device() == pixels.device(),
              "ResizeCropsInto: batch must be a (B, 3, side, side) float32 tensor beside the pixels, contiguous NCHW "
              "or channels-last");
  for (const kernels::CropResizeJob& job : jobs) {
    const bool inside = job.offset >= 0 && job.height > 0 && job.width > 0 &&
                        job.offset + 3 * int64_t{job.height} * job.width <= pixels.numel() && job.top >= 0 &&
                        job.left >= 0 && job.crop_height > 0 && job.crop_width > 0 &&
                        job.top + job.crop_height <= job.height && job.left + job.crop_width <= job.width &&
                        job.position >= 0 && job.position < batch.size(0);
    TORCH_CHECK(inside, "ResizeCropsInto: the crop (", job.top, ", ", job.left, ", ", job.crop_height, " x ",
                job.crop_width, ") of the image at ", job.offset, " (", job.height, " x ", job.width,
                ") for batch position ", job.position, " lies outside the pixels or the batch");
  }
}

}  // namespace

kernels::BatchLayout BatchLayoutOf(const torch::Tensor& batch, const LevelScaling& scaling) {
  kernels::BatchLayout layout;
  for (int d = 0; d < 4; ++d) layout.stride[d] = batch.stride(d);
  for (int c = 0; c < 3; ++c) {
    layout.scale[c] = scaling.scale[static_cast<size_t>(c)];
    layout.shift[c] = scaling.shift[static_cast<size_t>(c)];
  }
  return layout;
}

void ResizeCropsByAten(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                       torch::Tensor& batch, const LevelScaling& scaling) {
  CheckJobs(pixels, jobs, batch);
  const auto channel = [&](const std::array<float, 3>& values) {
    return torch::tensor(std::vector<float>(values.begin(), values.end())).view({3, 1, 1}).to(batch.device());
  };
  const torch::Tensor scale = channel(scaling.scale), shift = channel(scaling.shift);
  torch::NoGradGuard no_grad;
  const int64_t side = batch.size(2);
  for (const kernels::CropResizeJob& job : jobs) {
    const int64_t plane = int64_t{job.height} * job.width;
    const torch::Tensor crop = pixels.narrow(0, job.offset, 3 * plane)
                                   .view({3, job.height, job.width})
                                   .narrow(1, job.top, job.crop_height)
                                   .narrow(2, job.left, job.crop_width)
                                   .to(torch::kFloat32);  // (3, h, w)
    torch::Tensor resized = crop;
    if (job.crop_height != side || job.crop_width != side) {
      resized = at::_upsample_bilinear2d_aa(crop.unsqueeze(0), {side, side}, /*align_corners=*/false).squeeze(0);
    }
    resized = resized.round().clamp_(0, 255).mul_(scale).add_(shift);
    batch[job.position].copy_(job.flip ? resized.flip({2}) : resized);
  }
}

#ifdef MGPU_HAS_CROP_RESIZE_KERNEL
void ResizeCropsInto(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                     torch::Tensor& batch, const LevelScaling& scaling) {
  if (!pixels.is_cuda()) return ResizeCropsByAten(pixels, jobs, batch, scaling);
  CheckJobs(pixels, jobs, batch);
  if (jobs.empty()) return;
  const kernels::BatchLayout layout = BatchLayoutOf(batch, scaling);
  const int64_t bytes = static_cast<int64_t>(jobs.size() * sizeof(kernels::CropResizeJob));
  torch::Tensor host = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(true));
  std::memcpy(host.data_ptr<uint8_t>(), jobs.data(), static_cast<size_t>(bytes));
  // The pinned allocator keeps `host` until the copy, which is ordered before the kernel, has run.
  const torch::Tensor on_device = host.to(pixels.device(), /*non_blocking=*/true);
  const auto* device_jobs = reinterpret_cast<const kernels::CropResizeJob*>(on_device.data_ptr<uint8_t>());
  C10_CUDA_CHECK(kernels::LaunchCropResize(device_jobs, static_cast<int32_t>(jobs.size()), pixels.data_ptr<uint8_t>(),
                                           static_cast<int32_t>(batch.size(2)), layout, batch.data_ptr<float>(),
                                           at::cuda::getCurrentCUDAStream()));
}
#else
void ResizeCropsInto(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                     torch::Tensor& batch, const LevelScaling& scaling) {
  ResizeCropsByAten(pixels, jobs, batch, scaling);  // a build without nvcc (scripts/setup.sh provides it)
}
#endif

}  // namespace mgpu
