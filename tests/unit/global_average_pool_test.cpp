// Specification of GlobalAveragePool (models/global_average_pool.h): AdaptiveAvgPool2d(1) and
// flatten, bit for bit forward and backward, with x's gradient in x's memory format. The GPU test
// (tests/gpu/global_average_pool_cuda_test.cpp) runs the same cases on CUDA.
#include "tests/support/global_average_pool_cases.h"

namespace mgpu {
namespace {

TEST(GlobalAveragePool, IsAdaptiveAvgPoolsBitsWithTheGradientInXsFormat) {
  ExpectAdaptiveAvgPoolsBits(torch::kCPU);
}

}  // namespace
}  // namespace mgpu
