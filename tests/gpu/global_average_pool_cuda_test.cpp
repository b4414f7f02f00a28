// GlobalAveragePool (models/global_average_pool.h) on a GPU: ATen's AdaptiveAvgPool2d(1) bit for
// bit, with the gradient in x's format. Skipped, saying so, on machines without a GPU.
#include "tests/support/global_average_pool_cases.h"

namespace mgpu {
namespace {

TEST(GlobalAveragePoolCuda, IsAdaptiveAvgPoolsBitsWithTheGradientInXsFormat) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  ExpectAdaptiveAvgPoolsBits(torch::kCUDA);
}

}  // namespace
}  // namespace mgpu
