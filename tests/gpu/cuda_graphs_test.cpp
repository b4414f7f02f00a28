// --cuda-graphs, --channels-last and --data-on-device on a GPU: the graphed step trains like the
// eager one. Skipped, saying so, on machines without a CUDA device.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

class CudaGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    // 650 training images in batches of 64: 10 full batches and a partial one per epoch.
    WriteTinyMnistLike(dir_ / "data", 650, 200);
  }
  nlohmann::json Train(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", dir_ / "data", "--device", "cuda",
                                     "--batch-size", "64", "--epochs", "2", "--seed", "9", "--lr", "0.003",
                                     "--scheduler", "cosine", "--out", dir_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return nlohmann::json::parse(ReadText(dir_ / (name + "/summary.json")));
  }
  TempDir dir_;
};

// Replays of the captured step follow the eager trajectory (lr schedule and partial batches
// included) up to the GPU's non-deterministic summation order.
TEST_F(CudaGraphs, GraphedStepsTrainLikeEagerOnesInEveryPrecision) {
  for (const std::string precision : {"fp32", "amp-bf16", "amp-fp16"}) {
    std::vector<std::string> flags = {"--precision", precision};
    if (precision == "amp-fp16") flags.insert(flags.end(), {"--loss-scale", "dynamic"});
    const auto eager = Train("eager-" + precision, flags);
    flags.insert(flags.end(), {"--cuda-graphs", "true"});
    const auto graphed = Train("graphed-" + precision, flags);
    ASSERT_TRUE(graphed.contains("cuda_graphs")) << precision;
    EXPECT_TRUE(graphed["cuda_graphs"]["captured"].get<bool>()) << precision;
    // 2 epochs x 11 steps: 3 eager before capture, 2 partial batches eager, the rest replayed.
    EXPECT_EQ(graphed["cuda_graphs"]["eager_steps"].get<int64_t>(), 5) << precision;
    EXPECT_EQ(graphed["cuda_graphs"]["replays"].get<int64_t>(), 17) << precision;
    EXPECT_EQ(graphed["steps"], eager["steps"]);
    const double expected = eager["param_checksum"];
    EXPECT_NEAR(graphed["param_checksum"].get<double>(), expected, 1e-3 * expected) << precision;
    EXPECT_NEAR(graphed["test_accuracy"].get<double>(), eager["test_accuracy"].get<double>(), 2.0) << precision;
    EXPECT_DOUBLE_EQ(graphed["final_lr"].get<double>(), eager["final_lr"].get<double>()) << precision;
  }
}

TEST_F(CudaGraphs, AllSpeedOptionsTogetherOnAResNet) {
  const std::vector<std::string> resnet = {"--model", "resnet18", "--max-steps", "12", "--precision", "amp-bf16"};
  auto flags = resnet;
  const auto eager = Train("resnet-eager", flags);
  flags.insert(flags.end(), {"--cuda-graphs", "true", "--channels-last", "true", "--data-on-device", "true"});
  const auto fast = Train("resnet-fast", flags);
  EXPECT_EQ(fast["cuda_graphs"]["replays"].get<int64_t>(), 8);
  const double expected = eager["param_checksum"];
  EXPECT_NEAR(fast["param_checksum"].get<double>(), expected, 1e-3 * expected);
}

}  // namespace
}  // namespace mgpu
