#include "data/crop_resize.h"

#include <cstring>

#ifdef MGPU_HAS_CROP_RESIZE_KERNEL
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "data/kernels/crop_resize_kernels.h"
#endif

namespace mgpu {

void ResizeCropsByAten(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                       torch::Tensor& batch) {
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
    resized = resized.round().clamp_(0, 255);
    batch[job.position].copy_(job.flip ? resized.flip({2}) : resized);
  }
}

#ifdef MGPU_HAS_CROP_RESIZE_KERNEL
void ResizeCropsInto(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                     torch::Tensor& batch) {
  if (!pixels.is_cuda()) return ResizeCropsByAten(pixels, jobs, batch);
  if (jobs.empty()) return;
  const int64_t bytes = static_cast<int64_t>(jobs.size() * sizeof(kernels::CropResizeJob));
  torch::Tensor host = torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(true));
  std::memcpy(host.data_ptr<uint8_t>(), jobs.data(), static_cast<size_t>(bytes));
  // The pinned allocator keeps `host` until the copy, which is ordered before the kernel, has run.
  const torch::Tensor on_device = host.to(pixels.device(), /*non_blocking=*/true);
  const auto* device_jobs = reinterpret_cast<const kernels::CropResizeJob*>(on_device.data_ptr<uint8_t>());
  C10_CUDA_CHECK(kernels::LaunchCropResize(device_jobs, static_cast<int32_t>(jobs.size()), pixels.data_ptr<uint8_t>(),
                                           static_cast<int32_t>(batch.size(2)), batch.data_ptr<float>(),
                                           at::cuda::getCurrentCUDAStream()));
}
#else
void ResizeCropsInto(const torch::Tensor& pixels, const std::vector<kernels::CropResizeJob>& jobs,
                     torch::Tensor& batch) {
  ResizeCropsByAten(pixels, jobs, batch);  // a build without nvcc (scripts/setup.sh provides it)
}
#endif

}  // namespace mgpu
