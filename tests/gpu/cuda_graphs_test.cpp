// --cuda-graphs, --channels-last and --data-on-device on a GPU: the graphed step trains like the
// eager one, on one GPU and as a DDP step on two; channels-last DDP trains like the default layout. Skipped, saying so, on machines without the GPUs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tests/support/image_files.h"
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
  // Two DDP ranks over NCCL, on cuda:0 and cuda:1, with the same flags as Train (a global batch of 64).
  // `faults`: MGPU_TEST_FAULTS for every rank (worker/test_faults.h); "" none.
  std::vector<std::unique_ptr<BackgroundCommand>> StartDdp(const std::string& name, std::vector<std::string> extra,
                                                           const std::string& faults = "") {
    const int port = FreeLocalPort();
    std::vector<std::unique_ptr<BackgroundCommand>> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> argv = {MGPU_WORKER_BIN, "--mode", "ddp", "--backend", "nccl", "--data-dir",
                                       dir_ / "data", "--batch-size", "64", "--epochs", "2", "--seed", "9",
                                       "--lr", "0.003", "--scheduler", "cosine", "--out", dir_ / name};
      argv.insert(argv.end(), extra.begin(), extra.end());
      std::vector<std::string> environment = TorchrunEnvironment(rank, 2, port);
      environment.push_back("NCCL_NVLS_ENABLE=0");
      if (!faults.empty()) environment.push_back("MGPU_TEST_FAULTS=" + faults);
      ranks.push_back(std::make_unique<BackgroundCommand>(argv, environment));
    }
    return ranks;
  }
  nlohmann::json TrainDdp(const std::string& name, std::vector<std::string> extra) {
    for (auto& rank : StartDdp(name, std::move(extra))) {
      CommandResult result = rank->Wait();
      EXPECT_EQ(result.exit_code, 0) << result.output;
    }
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

// With --data-on-device the graph also gathers and normalizes the batch and adds its loss to the
// epoch's running sums (the host only copies the batch's indices in and launches it): the run
// follows the eager one, epoch losses included, whether non-finite losses stop or skip.
TEST_F(CudaGraphs, TheGraphGathersItsBatchAndSumsTheEpochLoss) {
  for (const std::string on_nonfinite : {"stop", "skip"}) {
    std::vector<std::string> flags = {"--data-on-device", "true", "--on-nonfinite", on_nonfinite, "--log-every", "4"};
    const auto eager = Train("resident-eager-" + on_nonfinite, flags);
    flags.insert(flags.end(), {"--cuda-graphs", "true"});
    const auto graphed = Train("resident-graphed-" + on_nonfinite, flags);
    EXPECT_EQ(graphed["cuda_graphs"]["eager_steps"].get<int64_t>(), 5) << on_nonfinite;
    EXPECT_EQ(graphed["cuda_graphs"]["replays"].get<int64_t>(), 17) << on_nonfinite;
    const double expected = eager["param_checksum"];
    EXPECT_NEAR(graphed["param_checksum"].get<double>(), expected, 1e-3 * expected) << on_nonfinite;
    ASSERT_EQ(graphed["epochs_detail"].size(), 2u) << on_nonfinite;
    for (size_t epoch = 0; epoch < 2; ++epoch) {
      const double eager_loss = eager["epochs_detail"][epoch]["train_loss"];
      EXPECT_NEAR(graphed["epochs_detail"][epoch]["train_loss"].get<double>(), eager_loss, 1e-3 * eager_loss)
          << on_nonfinite << ", epoch " << epoch + 1;
    }
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
  // Under autocast on one device the graph batches the weights' casts (amp/low_precision_weights.h).
  EXPECT_NE(ReadText(dir_ / "resnet-fast/logs/rank-0.log").find("autocast's weight casts batched"), std::string::npos);
}

// --decode gpu's producer thread goes on decoding (nvJPEG calls, stream polls, allocations) while
// the step is captured: the capture is thread-local, so neither side fails.
TEST_F(CudaGraphs, GraphedStepsTrainFromJpegsDecodedOnTheGpuMeanwhile) {
  WriteColourImageFolder(dir_ / "jpegs", ColourSetOptions{4, 80, 8, 60, 160, 21});  // 320: 10 batches of 32
  const CommandResult result = RunCommand(
      {MGPU_WORKER_BIN, "--dataset", "imagefolder", "--data-dir", dir_ / "jpegs", "--data-loading", "stream",
       "--decode", "gpu", "--augment", "rrc-flip", "--image-size", "64", "--resize", "64", "--model", "resnet18",
       "--precision", "amp-bf16", "--channels-last", "true", "--batch-size", "32", "--num-workers", "2",
       "--epochs", "3", "--max-steps", "25", "--cuda-graphs", "true", "--device", "cuda", "--out", dir_ / "jpegs-graphed"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto summary = nlohmann::json::parse(ReadText(dir_ / "jpegs-graphed/summary.json"));
  const int64_t eager = summary["cuda_graphs"]["eager_steps"], replays = summary["cuda_graphs"]["replays"];
  EXPECT_EQ(eager + replays, 25);
  EXPECT_GE(replays, 20);
  EXPECT_GT(summary["gpu_decode"]["images"].get<int64_t>(), 0);
  EXPECT_TRUE(std::isfinite(summary["epochs_detail"][0]["train_loss"].get<double>()));
  // The worker widened CUDA's work queues for the decode, or names the environment's value (worker/cuda_work_queues.h).
  const std::string log = ReadText(dir_ / "jpegs-graphed/logs/rank-0.log");
  const char* preset = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_NE(log.find(preset && *preset ? "from the environment" : "CUDA work queues: 32 ("), std::string::npos) << log;
}

// A graphed DDP step replays forward, backward with the bucket all-reduces, and the optimizer
// as one graph per rank: it follows the eager DDP run (partial batches eager, buffers broadcast,
// gradients copied back out of the buckets), and the ranks stay identical.
TEST_F(CudaGraphs, GraphedDdpStepsTrainLikeEagerDdpSteps) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: graphed DDP test skipped";
  struct Configuration {
    std::string name;
    std::vector<std::string> flags;
    double accuracy_points;  // how far apart the two runs' accuracies on 200 test images may be
  };
  // bfloat16 and batch norm make the ResNet's accuracy after 22 steps vary by many points, as the
  // eval's running statistics follow the last few batches: on 2x H100, 90% eager against 96%
  // graphed, later 97% against 78% once in six runs with mgpu's batch norms (the other five within
  // 10 points, as two with ATen's were). Its parameters still agree to 1e-3; a graph that lost the
  // running statistics' updates would score near chance (10%).
  const std::vector<Configuration> configurations = {
      {"lenet", {"--precision", "fp32"}, 2.0},
      // bfloat16 on the wire (the bucket's cast and cast back are captured too) and DDP's other switches.
      {"lenet-options",
       {"--precision", "fp32", "--ddp-compression", "bf16", "--find-unused-parameters", "true", "--broadcast-buffers",
        "false"},
       2.0},
      {"resnet", {"--model", "resnet18", "--precision", "amp-bf16", "--gradient-as-bucket-view", "false"}, 30.0}};
  for (const auto& [name, flags, accuracy_points] : configurations) {
    const auto eager = TrainDdp(name + "-eager", flags);
    auto graphed_flags = flags;
    graphed_flags.insert(graphed_flags.end(), {"--cuda-graphs", "true"});
    const auto graphed = TrainDdp(name + "-graphed", graphed_flags);
    ASSERT_TRUE(graphed.contains("cuda_graphs")) << name;
    EXPECT_TRUE(graphed["cuda_graphs"]["captured"].get<bool>()) << name;
    // 650 images: 325 per rank, 10 batches of 32 and one of 5 per epoch; 2 epochs.
    EXPECT_EQ(graphed["cuda_graphs"]["eager_steps"].get<int64_t>(), 5) << name;
    EXPECT_EQ(graphed["cuda_graphs"]["replays"].get<int64_t>(), 17) << name;
    EXPECT_EQ(graphed["rank_param_checksums"][0], graphed["rank_param_checksums"][1]) << name;
    const double expected = eager["param_checksum"];
    EXPECT_NEAR(graphed["param_checksum"].get<double>(), expected, 1e-3 * std::abs(expected)) << name;
    EXPECT_NEAR(graphed["test_accuracy"].get<double>(), eager["test_accuracy"].get<double>(), accuracy_points) << name;
    // The replayed all-reduces are inside the graph's time: no separate collective total.
    EXPECT_FALSE(graphed["epochs_detail"][0]["phase_seconds"].contains("collectives_total")) << name;
    EXPECT_TRUE(eager["epochs_detail"][0]["phase_seconds"].contains("collectives_total")) << name;
  }
}

// Channels-last under DDP: the bucket views take the weights' NHWC strides, and the run follows
// the default layout's. LeNet in float32 within the float32 reordering bound; a ResNet-18 under
// amp-bf16, where auto picks channels-last, eager and graphed, within the bound the graphed
// ResNet tests above hold bfloat16 runs to.
TEST_F(CudaGraphs, ChannelsLastDdpOnTwoGpusTrainsLikeTheDefaultLayout) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: channels-last DDP test skipped";
  const std::vector<std::string> lenet = {"--precision", "fp32"};
  auto flags = lenet;
  flags.insert(flags.end(), {"--channels-last", "false"});
  const auto nchw = TrainDdp("lenet-nchw", flags);
  flags = lenet;
  flags.insert(flags.end(), {"--channels-last", "true"});
  const auto nhwc = TrainDdp("lenet-nhwc", flags);
  EXPECT_EQ(nchw["channels_last"], false);
  EXPECT_EQ(nhwc["channels_last"], true);
  EXPECT_EQ(nhwc["rank_param_checksums"][0], nhwc["rank_param_checksums"][1]);
  // 2 epochs of 11 steps; LeNet's longest gradient sum: conv1's weight over 64 images' 28x28 outputs.
  const double tolerance = Float32ReorderingTolerance(22, 64 * 28 * 28);
  const double reference = nchw["param_checksum"];
  EXPECT_NEAR(nhwc["param_checksum"].get<double>(), reference, tolerance * std::abs(reference));

  const std::vector<std::string> resnet = {"--model", "resnet18", "--max-steps", "12", "--precision", "amp-bf16"};
  flags = resnet;
  flags.insert(flags.end(), {"--channels-last", "false"});
  const auto resnet_nchw = TrainDdp("resnet-nchw", flags);
  const auto resnet_auto = TrainDdp("resnet-auto", resnet);
  flags = resnet;
  flags.insert(flags.end(), {"--cuda-graphs", "true"});
  const auto resnet_graphed = TrainDdp("resnet-auto-graphed", flags);
  EXPECT_EQ(resnet_auto["channels_last"], true) << "auto: a convolutional net on CUDA under amp-bf16";
  EXPECT_NE(ReadText(dir_ / "resnet-auto/logs/rank-0.log").find("channels-last (auto:"), std::string::npos);
  EXPECT_TRUE(resnet_graphed["cuda_graphs"]["captured"].get<bool>());
  const double expected = resnet_nchw["param_checksum"];
  for (const auto* run : {&resnet_auto, &resnet_graphed}) {
    EXPECT_EQ((*run)["rank_param_checksums"][0], (*run)["rank_param_checksums"][1]);
    EXPECT_NEAR((*run)["param_checksum"].get<double>(), expected, 1e-3 * std::abs(expected));
  }
}

// Replays are held to the collective timeout: when one rank stops, the other's replay waits in
// its captured all-reduce, and the watchdog fails it naming the graph instead of hanging.
TEST_F(CudaGraphs, ARankThatStopsReplayingFailsTheOtherAtTheCollectiveTimeout) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: graphed DDP test skipped";
  const auto start = std::chrono::steady_clock::now();
  auto ranks = StartDdp("hang", {"--cuda-graphs", "true", "--epochs", "1000", "--collective-timeout", "5"},
                        "hang-at-step=6,hang-rank=1");
  // Rank 1 hangs on purpose (it is killed at the end); rank 0 must not, and if it does, its output says where.
  const CommandResult rank0 = ranks[0]->WaitAtMost(90);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rank0.exit_code, 1) << rank0.output;
  EXPECT_NE(rank0.output.find("the replayed CUDA graph of a DDP step"), std::string::npos) << rank0.output;
  EXPECT_NE(rank0.output.find("did not complete within 5 s"), std::string::npos) << rank0.output;
  EXPECT_LT(seconds, 60) << rank0.output;
}

}  // namespace
}  // namespace mgpu
