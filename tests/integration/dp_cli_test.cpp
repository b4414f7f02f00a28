// --mode dp end to end on the CPU: mgpu-worker with two CPU replicas trains to the parameters
// of one process with the same global batch (uneven splits included), writes the contract's
// outputs plus per-device timing, and refuses bad --dp-devices values with exit code 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/saved_models.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

class DpCli : public ::testing::Test {
 protected:
  void SetUp() override { WriteTinyMnistLike(data_.path(), 640, 200); }

  // LeNet's longest gradient sum: conv1's weight, over a batch of 27 and its 28x28 outputs.
  static constexpr int64_t kLongestSum = 27 * 28 * 28;

  // Batch 27: 640 images are 23 batches of 27 (split 14 + 13) and a last one of 19 (10 + 9).
  CommandResult Train(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", data_.path(), "--device", "cpu", "--threads", "1",
                                     "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--seed", "7",
                                     "--batch-size", "27", "--epochs", "1", "--out", out_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }

  TempDir data_;
  TempDir out_;
};

TEST_F(DpCli, TwoCpuReplicasTrainLikeOneProcessAndReportTimingPerDevice) {
  CommandResult single = Train("single", {});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  CommandResult dp = Train("dp", {"--mode", "dp", "--dp-devices", "cpu,cpu", "--num-workers", "2"});
  ASSERT_EQ(dp.exit_code, 0) << dp.output;

  const nlohmann::json summary = ReadSummary(out_ / "dp");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["mode"], "dp");
  EXPECT_EQ(summary["world_size"], 1);
  EXPECT_EQ(summary["devices"], nlohmann::json::array({"cpu", "cpu"}));
  EXPECT_EQ(summary["dp_impl"], "mgpu");
  EXPECT_EQ(summary["steps"], 24);
  ASSERT_EQ(summary["peak_memory_bytes"].size(), 2u);
  EXPECT_GT(summary["peak_memory_bytes"][1].get<double>(), 0);
  const nlohmann::json& timing = summary["dp_timing"];
  ASSERT_EQ(timing["forward_seconds"].size(), 2u);
  ASSERT_EQ(timing["backward_seconds"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(timing["forward_seconds"][r].get<double>(), 0) << "replica " << r;
    EXPECT_GT(timing["backward_seconds"][r].get<double>(), 0) << "replica " << r;
  }
  EXPECT_GT(timing["reduce_seconds"].get<double>(), 0);
  EXPECT_GT(timing["broadcast_seconds"].get<double>(), 0);
  EXPECT_EQ(timing["forward_backward_calls"], 24);

  const nlohmann::json reference = ReadSummary(out_ / "single");
  // Slices of 14 and 13 images run other CPU convolution kernels than a batch of 27: the same
  // sums in another order. The checksum (a sum of |p|) moves by no more than its terms do.
  const double tolerance = Float32ReorderingTolerance(24, kLongestSum);
  EXPECT_LE(MaxRelativeDifference(out_ / "dp/model_state_dict.pt", out_ / "single/model_state_dict.pt"), tolerance);
  EXPECT_NEAR(summary["param_checksum"].get<double>(), reference["param_checksum"].get<double>(),
              tolerance * reference["param_checksum"].get<double>());
  EXPECT_NEAR(summary["test_accuracy"].get<double>(), reference["test_accuracy"].get<double>(), 0.5);
}

TEST_F(DpCli, ChannelsLastReplicasTrainToTheDefaultLayoutsParameters) {
  const std::vector<std::string> dp = {"--mode", "dp", "--dp-devices", "cpu,cpu", "--max-steps", "8"};
  CommandResult nchw = Train("nchw", dp);
  ASSERT_EQ(nchw.exit_code, 0) << nchw.output;
  std::vector<std::string> channels_last = dp;
  channels_last.insert(channels_last.end(), {"--channels-last", "true"});
  CommandResult nhwc = Train("nhwc", channels_last);
  ASSERT_EQ(nhwc.exit_code, 0) << nhwc.output;
  const nlohmann::json summary = ReadSummary(out_ / "nhwc");
  EXPECT_EQ(summary["channels_last"], true);
  const double reference = ReadSummary(out_ / "nchw")["param_checksum"];
  const double tolerance = Float32ReorderingTolerance(8, kLongestSum);
  EXPECT_NEAR(summary["param_checksum"].get<double>(), reference, tolerance * reference);
  EXPECT_LE(MaxRelativeDifference(out_ / "nhwc/model_state_dict.pt", out_ / "nchw/model_state_dict.pt"), tolerance);
}

TEST_F(DpCli, LabelSmoothingAppliesToEveryReplicasLossAsInOneProcess) {
  const std::vector<std::string> smoothing = {"--label-smoothing", "0.2", "--max-steps", "8"};
  CommandResult single = Train("single", smoothing);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  std::vector<std::string> dp_flags = {"--mode", "dp", "--dp-devices", "cpu,cpu"};
  dp_flags.insert(dp_flags.end(), smoothing.begin(), smoothing.end());
  CommandResult dp = Train("dp", dp_flags);
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  CommandResult plain = Train("plain", {"--mode", "dp", "--dp-devices", "cpu,cpu", "--max-steps", "8"});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_LE(MaxRelativeDifference(out_ / "dp/model_state_dict.pt", out_ / "single/model_state_dict.pt"),
            Float32ReorderingTolerance(8, kLongestSum));
  EXPECT_GT(MaxRelativeDifference(out_ / "plain/model_state_dict.pt", out_ / "single/model_state_dict.pt"), 1e-3)
      << "without smoothing the run must differ, or this test shows nothing";
}

TEST_F(DpCli, SeedStyleModeDpIsAnAlias) {
  CommandResult dp = Train("dp", {"--mode", "DP", "--device", "cpu", "--max-steps", "3"});
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  EXPECT_EQ(ReadSummary(out_ / "dp")["mode"], "dp");
  // auto with --device cpu: two CPU replicas.
  EXPECT_EQ(ReadSummary(out_ / "dp")["devices"], nlohmann::json::array({"cpu", "cpu"}));
  EXPECT_NE(ReadText(out_ / "dp/config.yaml").find("mode: dp"), std::string::npos);
}

TEST_F(DpCli, BadDeviceListsExitWithCodeTwoAndSayWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpu0,gpu1", "'gpu0' is not a device"},
      {"cpu,,cpu", "entry 2 is empty"},
      {"cpu,cuda:0", torch::cuda::is_available() ? "mixes cpu and CUDA" : "no CUDA device is visible"},
  };
  for (const auto& [list, expected] : cases) {
    CommandResult result = Train("bad", {"--mode", "dp", "--dp-devices", list});
    EXPECT_EQ(result.exit_code, 2) << list << ": " << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos) << list << ": " << result.output;
  }
}

TEST_F(DpCli, LibTorchsDataParallelOnCpuReplicasIsRefused) {
  CommandResult result = Train("libtorch", {"--mode", "dp", "--dp-devices", "cpu,cpu", "--dp-impl", "libtorch"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("needs CUDA devices"), std::string::npos) << result.output;
  EXPECT_EQ(ReadSummary(out_ / "libtorch")["status"], "failed");
}

}  // namespace
}  // namespace mgpu
