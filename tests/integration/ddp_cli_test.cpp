// DDP end to end with real processes on the CPU: two ranks with batch B each train to the same
// parameters as one process with batch 2B, under torchrun's environment (gloo) and under
// mpirun (mpi, and gloo bootstrapped over MPI); gradient accumulation with no_sync equals the
// full batch; a rank with a different model stops every rank with exit code 2.
#include <gtest/gtest.h>


#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/files.h"
#include "tests/support/saved_models.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

// ||a - b|| / ||b|| over all parameters: the measure for lossy (compressed) reductions.
double RelativeNormDifference(const std::string& a_path, const std::string& b_path) {
  const std::vector<torch::Tensor> a = SavedLeNetParameters(a_path), b = SavedLeNetParameters(b_path);
  double difference = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference += (a[i] - b[i]).pow(2).sum().item<double>();
    norm += b[i].pow(2).sum().item<double>();
  }
  return std::sqrt(difference / norm);
}

bool HaveMpirun() { return RunCommand({"/bin/sh", "-c", "command -v mpirun"}).exit_code == 0; }

class DdpCli : public ::testing::Test {
 protected:
  static constexpr int kSteps = 20;

  void SetUp() override { WriteTinyMnistLike(data_.path(), 640, 200); }

  std::vector<std::string> CommonFlags(const std::string& out) {
    return {"--data-dir", data_.path(), "--device", "cpu", "--threads", "1", "--optimizer", "sgd", "--lr", "0.05",
            "--momentum", "0.9", "--seed", "11", "--max-steps", std::to_string(kSteps), "--epochs", "3",
            "--out", out_ / out};
  }

  // One process with the global batch: the reference.
  void RunSingle(const std::string& out, int global_batch) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--batch-size", std::to_string(global_batch)};
    for (auto& flag : CommonFlags(out)) argv.push_back(flag);
    CommandResult result = RunCommand(argv);
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }

  // Two ranks started with torchrun's environment.
  std::vector<CommandResult> RunTorchrunStyle(const std::string& out, std::vector<std::string> extra,
                                              std::vector<std::vector<std::string>> per_rank = {{}, {}}) {
    const int port = FreeLocalPort();
    std::vector<std::unique_ptr<BackgroundCommand>> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> argv = {MGPU_WORKER_BIN, "--mode", "ddp"};
      for (auto& flag : CommonFlags(out)) argv.push_back(flag);
      argv.insert(argv.end(), extra.begin(), extra.end());
      argv.insert(argv.end(), per_rank[rank].begin(), per_rank[rank].end());
      ranks.push_back(std::make_unique<BackgroundCommand>(argv, TorchrunEnvironment(rank, 2, port)));
    }
    std::vector<CommandResult> results;
    for (auto& rank : ranks) results.push_back(rank->Wait());
    return results;
  }

  void ExpectMatchesSingle(const std::string& ddp_out, const std::string& single_out) {
    const nlohmann::json summary = ReadSummary(out_ / ddp_out);
    EXPECT_EQ(summary["status"], "ok");
    EXPECT_EQ(summary["world_size"], 2);
    EXPECT_EQ(summary["steps"], kSteps);
    ASSERT_EQ(summary["rank_param_checksums"].size(), 2u);
    EXPECT_EQ(summary["rank_param_checksums"][0], summary["rank_param_checksums"][1]) << "every rank ends equal";
    EXPECT_EQ(summary["param_checksum"], summary["rank_param_checksums"][0]);
    // LeNet's longest gradient sum: conv1's weight, over the global batch and its 28x28 outputs.
    const double tolerance = Float32ReorderingTolerance(kSteps, summary["batch_size"].get<int64_t>() * 28 * 28);
    // Relative to each tensor's largest magnitude, the scale the bound is relative to: an element
    // near 0 would magnify a rounding difference by 1 / its size.
    EXPECT_LE(MaxRelativeDifference(out_ / (ddp_out + "/model_state_dict.pt"), out_ / (single_out + "/model_state_dict.pt")), tolerance);
    EXPECT_TRUE(PathExists(out_ / (ddp_out + "/logs/rank-1.log")));
  }

  TempDir data_;
  TempDir out_;
};

TEST_F(DdpCli, GlooUnderTorchrunEnvironmentMatchesOneProcessWithTheGlobalBatch) {
  RunSingle("single", 64);
  std::vector<CommandResult> ranks = RunTorchrunStyle("ddp", {"--batch-size", "64", "--backend", "gloo"});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectMatchesSingle("ddp", "single");
  const nlohmann::json summary = ReadSummary(out_ / "ddp");
  EXPECT_EQ(summary["backend"], "gloo");
  EXPECT_EQ(summary["ddp_buckets_rebuilt"], true);
  EXPECT_NE(ReadText(out_ / "ddp/logs/rank-1.log").find("torchrun environment"), std::string::npos);
}

TEST_F(DdpCli, ChannelsLastTrainsToTheDefaultLayoutsParameters) {
  std::vector<CommandResult> ranks = RunTorchrunStyle("nchw", {"--batch-size", "64", "--backend", "gloo"});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  ranks = RunTorchrunStyle("nhwc", {"--batch-size", "64", "--backend", "gloo", "--channels-last"});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json nchw = ReadSummary(out_ / "nchw"), nhwc = ReadSummary(out_ / "nhwc");
  EXPECT_EQ(nchw["channels_last"], false) << "auto: off on the CPU";
  EXPECT_EQ(nhwc["channels_last"], true);
  EXPECT_EQ(nhwc["rank_param_checksums"][0], nhwc["rank_param_checksums"][1]) << "every rank ends equal";
  // NHWC convolutions sum in another order: LeNet's conv1 weight gradient over the global
  // batch's 28x28 outputs.
  const double tolerance = Float32ReorderingTolerance(kSteps, 64 * 28 * 28);
  const double reference = nchw["param_checksum"];
  EXPECT_NEAR(nhwc["param_checksum"].get<double>(), reference, tolerance * reference);
  EXPECT_NE(ReadText(out_ / "nhwc/logs/rank-0.log").find("channels-last (--channels-last true)"), std::string::npos);
}

TEST_F(DdpCli, NoSyncAccumulationOfHalfBatchesEqualsTheFullBatch) {
  RunSingle("single", 64);
  std::vector<CommandResult> ranks =
      RunTorchrunStyle("accum", {"--batch-size", "64", "--backend", "gloo", "--grad-accum", "2"});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectMatchesSingle("accum", "single");
}

TEST_F(DdpCli, GradientAsBucketViewAndCompressionStillTrain) {
  std::vector<CommandResult> ranks = RunTorchrunStyle(
      "views", {"--batch-size", "64", "--backend", "gloo", "--gradient-as-bucket-view", "true"});
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.output;
  RunSingle("single", 64);
  ExpectMatchesSingle("views", "single");
  std::vector<CommandResult> compressed =
      RunTorchrunStyle("bf16", {"--batch-size", "64", "--backend", "gloo", "--ddp-compression", "bf16"});
  for (const auto& r : compressed) ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json summary = ReadSummary(out_ / "bf16");
  EXPECT_EQ(summary["rank_param_checksums"][0], summary["rank_param_checksums"][1]);
  EXPECT_LE(RelativeNormDifference(out_ / "bf16/model_state_dict.pt", out_ / "single/model_state_dict.pt"), 0.01);
}

TEST_F(DdpCli, TwoRanksStoppedAndResumedFromRankZerosCheckpointEndAsTheUninterruptedRun) {
  const std::vector<std::string> job = {"--batch-size", "64", "--backend", "gloo"};
  for (const auto& r : RunTorchrunStyle("whole", job)) ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> first = job;
  first.insert(first.end(), {"--max-steps", "13", "--checkpoint-every", "5"});
  for (const auto& r : RunTorchrunStyle("first", first)) ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ListDirectory(out_ / "first/checkpoints"),
            (std::vector<std::string>{"latest.ckpt", "step-10.ckpt", "step-13.ckpt", "step-5.ckpt"}))
      << "rank 0 alone writes, at steps 5, 10 (also the end of epoch 1) and 13";
  std::vector<std::string> second = job;
  second.insert(second.end(), {"--resume", out_ / "first"});
  for (const auto& r : RunTorchrunStyle("second", second)) ASSERT_EQ(r.exit_code, 0) << r.output;

  const nlohmann::json whole = ReadSummary(out_ / "whole");
  const nlohmann::json resumed = ReadSummary(out_ / "second");
  EXPECT_EQ(resumed["rank_param_checksums"], whole["rank_param_checksums"]);
  EXPECT_EQ(resumed["test_loss"], whole["test_loss"]);
  ASSERT_EQ(resumed["epochs_detail"].size(), 2u);
  // The resumed epoch's running loss was summed over the ranks at the checkpoint: the same
  // terms, added in another order.
  EXPECT_NEAR(resumed["epochs_detail"][1]["train_loss"].get<double>(),
              whole["epochs_detail"][1]["train_loss"].get<double>(), 1e-12);
}

TEST_F(DdpCli, ARankWithADifferentModelStopsEveryRankWithExitTwo) {
  TempDir other;
  WriteTinyMnistLike(other.path(), 640, 200, 32);  // 32x32 images: LeNet's fc1 is wider
  const auto start = std::chrono::steady_clock::now();
  std::vector<CommandResult> ranks =
      RunTorchrunStyle("mismatch", {"--batch-size", "64", "--backend", "gloo"}, {{}, {"--data-dir", other.path()}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  for (const auto& r : ranks) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("parameter 4 'fc1.weight' is 120x400 Float on rank 0 but 120x576 Float on rank 1"),
              std::string::npos)
        << r.output;
  }
}

TEST_F(DdpCli, MpirunWithTheMpiBackendAndWithGlooMatchesOneProcess) {
  if (!HaveMpirun()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (make deps does)";
  RunSingle("single", 64);
  for (const std::string backend : {"mpi", "gloo"}) {
    std::vector<std::string> argv = {"mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
                                     MGPU_WORKER_BIN, "--mode", "ddp", "--backend", backend, "--batch-size", "64"};
    for (auto& flag : CommonFlags("mpirun-" + backend)) argv.push_back(flag);
    CommandResult result = RunCommand(argv, {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                             "OMPI_MCA_rmaps_base_oversubscribe=1"});
    ASSERT_EQ(result.exit_code, 0) << result.output;
    ExpectMatchesSingle("mpirun-" + backend, "single");
    EXPECT_NE(ReadText(out_ / ("mpirun-" + backend + "/logs/rank-0.log")).find("Open MPI environment"),
              std::string::npos);
  }
}

TEST_F(DdpCli, MpiBackendWithoutMpirunIsABadInput) {
  std::vector<std::string> argv = {MGPU_WORKER_BIN, "--mode", "ddp", "--backend", "mpi"};
  for (auto& flag : CommonFlags("nompi")) argv.push_back(flag);
  CommandResult result = RunCommand(argv);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("needs the workers to be started by mpirun"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace mgpu
