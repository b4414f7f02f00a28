// The steps' stream (cuda/step_stream.h): while a StepStreamScope lives, the thread's current
// stream is a pool stream of the priority asked for; afterwards it is the default stream again.
// Skipped, saying so, without a CUDA device.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "cuda/step_stream.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace mgpu {
namespace {

TEST(StepStreamCuda, HighPriorityRunsAheadOfTheDefaultStreamsAndDefaultIsTheLeast) {
#ifndef MGPU_WITH_CUDA
  GTEST_SKIP() << "built without CUDA support";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  const torch::Device device(torch::kCUDA, 0);
  int least = 0, greatest = 0;  // numerically: the greatest priority is the smallest number
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  ASSERT_LT(greatest, least) << "this device has one stream priority only";
  const c10::cuda::CUDAStream default_stream = c10::cuda::getDefaultCUDAStream(0);
  ASSERT_EQ(c10::cuda::getCurrentCUDAStream(0), default_stream);
  {
    const StepStreamScope high(device, StreamPriority::kHigh);
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(0);
    EXPECT_NE(current, default_stream);
    // LibTorch's high-priority pool: above the least (the decode's side streams), within CUDA's range.
    EXPECT_LT(current.priority(), least);
    EXPECT_GE(current.priority(), greatest);
    // Work on it runs (and is ordered as the step's work is).
    const torch::Tensor sum = torch::ones({1024}, torch::TensorOptions(device)).sum();
    EXPECT_EQ(sum.item<float>(), 1024.0f);
  }
  EXPECT_EQ(c10::cuda::getCurrentCUDAStream(0), default_stream);
  {
    const StepStreamScope plain(device, StreamPriority::kDefault);
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(0);
    EXPECT_NE(current, default_stream) << "a graphed DDP step needs a capturable stream";
    EXPECT_EQ(current.priority(), least);
  }
  EXPECT_EQ(c10::cuda::getCurrentCUDAStream(0), default_stream);
#endif
}

}  // namespace
}  // namespace mgpu
