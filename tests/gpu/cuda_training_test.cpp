// GPU checks: skipped, saying so, on machines without a CUDA device.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(CudaTraining, TrainsOnTheGpuAndReportsAllocatorPeakMemory) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  TempDir dir;
  WriteTinyMnistLike(dir / "data", 640, 200);
  CommandResult result = RunCommand({MGPU_WORKER_BIN, "--data-dir", dir / "data", "--device", "cuda",
                                     "--epochs", "2", "--num-workers", "2", "--out", dir / "run"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"));
  EXPECT_EQ(summary["devices"][0], "cuda:0");
  EXPECT_GT(summary["peak_memory_bytes"][0].get<double>(), 0);
  EXPECT_GT(summary["test_accuracy"].get<double>(), 90.0);
}

}  // namespace
}  // namespace mgpu
