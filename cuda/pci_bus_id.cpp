#include "cuda/pci_bus_id.h"

#ifdef MGPU_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mgpu {

std::string CudaPciBusId(int index) {
#ifdef MGPU_WITH_CUDA
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), index) == cudaSuccess) return bus_id;
  (void)cudaGetLastError();  // leaves no sticky error for LibTorch's next check
#else
  (void)index;
#endif
  return "";
}

}  // namespace mgpu
