// A CUDA device's PCI address, which places it in the host's topology (its NUMA node:
// worker/cpu_topology.h).
#pragma once

#include <string>

namespace mgpu {

// The PCI address of visible CUDA device `index` as the runtime writes it ("0000:1A:00.0"), or ""
// in a build without CUDA or where the runtime cannot say. A query of the driver (CUDA starts
// first where nothing has started it).
std::string CudaPciBusId(int index);

}  // namespace mgpu
