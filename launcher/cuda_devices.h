// How many CUDA devices the workers will see, without LibTorch: `mgpu run --nproc-per-node auto`
// starts one worker per device and `mgpu serve --gpus auto` owns them all.
#pragma once

namespace mgpu {

// The devices of the CUDA driver (libcuda, opened at run time, so `mgpu` links no CUDA library)
// visible to this process (CUDA_VISIBLE_DEVICES applies), as LibTorch's torch::cuda::device_count()
// counts them in mgpu-worker: 0 without a driver or a device, with a driver older than the CUDA
// that LibTorch was built with, or with a LibTorch built without CUDA.
int VisibleCudaDevices();

}  // namespace mgpu
