#include "cuda/step_stream.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mgpu {

struct StepStreamScope::State {
#ifdef MGPU_WITH_CUDA
  explicit State(const c10::cuda::CUDAStream& stream) : guard(stream) {}
  c10::cuda::CUDAStreamGuard guard;
#endif
};

StepStreamScope::StepStreamScope(torch::Device device, StreamPriority priority) : priority_(priority) {
#ifdef MGPU_WITH_CUDA
  if (device.is_cuda()) {
    state_ = std::make_unique<State>(
        c10::cuda::getStreamFromPool(/*isHighPriority=*/priority == StreamPriority::kHigh, device.index()));
  }
#else
  (void)device;
#endif
}

StepStreamScope::~StepStreamScope() = default;

}  // namespace mgpu
