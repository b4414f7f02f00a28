// The NCCL element type of a tensor's dtype, shared by every NCCL user (DDP's communicator and
// DataParallel's in-process reduce/broadcast). Only for builds with NCCL.
#pragma once

#include <string>

#include <nccl.h>
#include <torch/torch.h>

namespace mgpu {

// Throws CollectiveError ("<context>: NCCL cannot reduce tensors of type ...") for dtypes NCCL
// has no type for.
ncclDataType_t NcclDataType(torch::ScalarType type, const std::string& context);

}  // namespace mgpu
