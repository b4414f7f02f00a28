#include "launcher/cuda_devices.h"

#include <dlfcn.h>

namespace mgpu {

int VisibleCudaDevices() {
#ifdef MGPU_CUDA_MAJOR
  // Never closed: the driver stays initialized for the life of the process.
  static void* const driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return 0;
  using Init = int (*)(unsigned int);
  using GetInt = int (*)(int*);
  const auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  const auto driver_version = reinterpret_cast<GetInt>(dlsym(driver, "cuDriverGetVersion"));
  const auto device_count = reinterpret_cast<GetInt>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || driver_version == nullptr || device_count == nullptr) return 0;
  // CUDA_SUCCESS is 0. LibTorch's CUDA runtime needs a driver of its major version or newer
  // (cuDriverGetVersion: 1000 x major + 10 x minor).
  int version = 0;
  int devices = 0;
  if (init(0) != 0 || driver_version(&version) != 0 || version / 1000 < MGPU_CUDA_MAJOR) return 0;
  if (device_count(&devices) != 0) return 0;
  return devices;
#else
  return 0;
#endif
}

}  // namespace mgpu
