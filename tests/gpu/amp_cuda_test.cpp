// Mixed precision on CUDA: autocast, the device-side GradScaler, float16 training and the
// allocator snapshot. Skipped, saying so, on machines without a CUDA device.
#include <gtest/gtest.h>

#include <limits>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped"

TEST(AmpCuda, AutocastFloat16MakesCudaMatmulHalf) {
  SKIP_WITHOUT_CUDA();
  const torch::Tensor a = torch::randn({8, 8}, torch::kCUDA);
  {
    AutocastScope scope(torch::kCUDA, torch::kHalf);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kHalf);
  }
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
}

TEST(AmpCuda, GradScalerBacksOffAndSkipsOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  torch::Tensor w = torch::ones({3}, torch::kCUDA).requires_grad_();
  OptimizerOptions o;
  o.kind = "adam";
  FusedOptimizer optimizer({w}, o);
  GradScaler scaler(ParseLossScaling("dynamic"), torch::Device(torch::kCUDA, 0));
  optimizer.ZeroGrad();
  const torch::Tensor x = torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 1.0f}).cuda();
  scaler.Scale((w * x).sum()).backward();
  scaler.Step(optimizer);
  scaler.Update();
  EXPECT_TRUE(torch::equal(w.cpu(), torch::ones({3})));
  EXPECT_EQ(scaler.scale(), 32768.0);
  optimizer.ZeroGrad();
  scaler.Scale((w * torch::ones({3}, torch::kCUDA)).sum()).backward();
  scaler.Step(optimizer);
  scaler.Update();
  EXPECT_LT(w[0].item<float>(), 1.0f);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

class AmpCudaWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    WriteTinyMnistLike(dir_ / "data", 640, 200);
  }
  CommandResult Train(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", dir_ / "data", "--device", "cuda",
                                     "--epochs", "2", "--log-every", "5", "--out", dir_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }
  nlohmann::json Summary(const std::string& name) { return nlohmann::json::parse(ReadText(dir_ / name + "/summary.json")); }
  TempDir dir_;
};

TEST_F(AmpCudaWorker, AmpFp16WithDynamicScalingStaysFinite) {
  CommandResult result = Train("run", {"--precision", "amp-fp16", "--loss-scale", "dynamic"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto summary = Summary("run");
  EXPECT_EQ(summary["precision"], "amp-fp16");
  EXPECT_EQ(summary["loss_scale_mode"], "dynamic");
  EXPECT_GT(summary["final_loss_scale"].get<double>(), 1.0);
  EXPECT_LT(summary["skipped_steps"].get<int64_t>(), 5);
  EXPECT_GT(summary["test_accuracy"].get<double>(), 90.0);
}

TEST_F(AmpCudaWorker, O2TrainsWithDynamicScalingAndClipping) {
  CommandResult result = Train("o2", {"--precision", "o2", "--loss-scale", "dynamic", "--grad-clip", "5"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_GT(Summary("o2")["test_accuracy"].get<double>(), 90.0);
}

TEST_F(AmpCudaWorker, MemorySnapshotIsAPickleForTheVisualizer) {
  CommandResult result = Train("run", {"--precision", "amp-bf16", "--memory-snapshot", dir_ / "snapshot.pickle"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string pickle = ReadText(dir_ / "snapshot.pickle");
  ASSERT_GT(pickle.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(pickle[0]), 0x80) << "pickle protocol marker";
  EXPECT_NE(pickle.find("device_traces"), std::string::npos);
  EXPECT_NE(pickle.find("segments"), std::string::npos);
}

}  // namespace
}  // namespace mgpu
