// --mode dp on two GPUs: the NCCL path trains to one GPU's parameters with the global batch,
// LibTorch's data_parallel runs for comparison, and amp-bf16 trains.
// Skipped, saying so, with fewer than two CUDA devices.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/saved_models.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

class CudaDp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: DataParallel GPU test skipped";
    WriteTinyMnistLike(dir_ / "data", 1280, 200);
  }

  // Batch 63 splits 32 + 31, and 1280 images end with a last batch of 20.
  CommandResult Train(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", dir_ / "data", "--optimizer", "sgd", "--lr", "0.05",
                                     "--seed", "4", "--epochs", "1", "--batch-size", "63", "--out", dir_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, {"NCCL_NVLS_ENABLE=0"});
  }

  nlohmann::json Summary(const std::string& name) { return nlohmann::json::parse(ReadText(dir_ / (name + "/summary.json"))); }

  TempDir dir_;
};

TEST_F(CudaDp, NcclReplicasOnTwoGpusMatchOneGpuWithTheGlobalBatch) {
  CommandResult single = Train("single", {"--device", "cuda:0"});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  CommandResult dp = Train("dp", {"--mode", "dp", "--dp-devices", "cuda:0,cuda:1", "--num-workers", "2"});
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  const nlohmann::json summary = Summary("dp");
  EXPECT_EQ(summary["devices"], nlohmann::json::array({"cuda:0", "cuda:1"}));
  EXPECT_EQ(summary["dp_comm"], "nccl");
  EXPECT_EQ(summary["dp_timing"]["clock"], "cuda-events");
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(summary["dp_timing"]["backward_seconds"][r].get<double>(), 0) << "replica " << r;
    EXPECT_GT(summary["peak_memory_bytes"][r].get<double>(), 0) << "replica " << r;
  }
  const double reference = Summary("single")["param_checksum"].get<double>();
  EXPECT_NEAR(summary["param_checksum"].get<double>(), reference, 1e-4 * reference);
}

// Replaying each replica's captured forward + backward follows the eager DataParallel run:
// 1280 images in batches of 63 are 20 full batches and a last one of 20, so 3 eager calls, the
// capture with its replay, 16 more replays and the short batch eager.
TEST_F(CudaDp, CudaGraphsPerReplicaTrainLikeEagerReplicas) {
  for (const std::string precision : {"fp32", "amp-fp16"}) {
    std::vector<std::string> flags = {"--mode", "dp", "--dp-devices", "cuda:0,cuda:1", "--precision", precision};
    if (precision == "amp-fp16") flags.insert(flags.end(), {"--loss-scale", "dynamic"});
    CommandResult eager = Train("eager-" + precision, flags);
    ASSERT_EQ(eager.exit_code, 0) << eager.output;
    flags.insert(flags.end(), {"--cuda-graphs", "true"});
    CommandResult graphed = Train("graphed-" + precision, flags);
    ASSERT_EQ(graphed.exit_code, 0) << graphed.output;
    const nlohmann::json summary = Summary("graphed-" + precision);
    ASSERT_TRUE(summary.contains("cuda_graphs")) << precision;
    EXPECT_TRUE(summary["cuda_graphs"]["captured"].get<bool>()) << precision;
    EXPECT_EQ(summary["cuda_graphs"]["replays"].get<int64_t>(), 17) << precision;
    EXPECT_EQ(summary["cuda_graphs"]["eager_steps"].get<int64_t>(), 4) << precision;
    const double reference = Summary("eager-" + precision)["param_checksum"].get<double>();
    EXPECT_NEAR(summary["param_checksum"].get<double>(), reference, 1e-4 * std::abs(reference)) << precision;
    // Per tensor too: the last batch (20 images) runs eagerly after the replays, and a replica
    // that added its gradients to the last replay's would move the weights of that step. In
    // float32 only: in amp-fp16 two runs of the same flags can end up to 2e-3 apart in some tensor
    // after these 21 steps (once in three graphed amp-fp16 runs on 2× H200, 2026-11-22; likely
    // float16 roundings of the algorithms cuDNN's benchmark mode picked in that run), and that
    // bug does not depend on the precision.
    if (precision == "fp32") {
      EXPECT_LE(MaxRelativeDifference(dir_ / ("graphed-" + precision + "/model_state_dict.pt"),
                                      dir_ / ("eager-" + precision + "/model_state_dict.pt")),
                1e-4);
    }
  }
}

TEST_F(CudaDp, LibTorchsDataParallelRunsForComparison) {
  CommandResult single = Train("single", {"--device", "cuda:0"});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  CommandResult dp = Train("libtorch", {"--mode", "dp", "--dp-devices", "cuda:0,cuda:1", "--dp-impl", "libtorch"});
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  const nlohmann::json summary = Summary("libtorch");
  EXPECT_EQ(summary["dp_impl"], "libtorch");
  const double reference = Summary("single")["param_checksum"].get<double>();
  EXPECT_NEAR(summary["param_checksum"].get<double>(), reference, 1e-4 * reference);
}

TEST_F(CudaDp, MixedPrecisionTrainsOnTwoGpus) {
  CommandResult dp = Train("bf16", {"--mode", "dp", "--dp-devices", "cuda:0,cuda:1", "--precision", "amp-bf16",
                                    "--epochs", "2"});
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  EXPECT_GT(Summary("bf16")["test_accuracy"].get<double>(), 90.0);
}

}  // namespace
}  // namespace mgpu
