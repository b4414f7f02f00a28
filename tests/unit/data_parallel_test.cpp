// Specification of single-process DataParallel (--mode dp): device lists, and that two CPU
// replicas train to the parameters of one process with the same global batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include <ATen/autocast_mode.h>

#include "amp/grad_scaler.h"
#include "cuda/captured_graph.h"
#include "dataparallel/data_parallel.h"
#include "dataparallel/dp_devices.h"
#include "models/memory_format.h"
#include "models/model_factory.h"
#include "optim/fused_optimizer.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using testing::BadInputMessage;
using testing::Float32ReorderingTolerance;

const torch::Device kCpu(torch::kCPU);
const torch::Device kCuda0(torch::kCUDA, 0), kCuda1(torch::kCUDA, 1);

TEST(DataParallelDevices, ListsCpuReplicasAndCudaDevicesInTheOrderGiven) {
  EXPECT_EQ(ResolveDataParallelDevices("cpu,cpu", "auto", 0), (std::vector<torch::Device>{kCpu, kCpu}));
  EXPECT_EQ(ResolveDataParallelDevices("cuda:1,0", "auto", 2), (std::vector<torch::Device>{kCuda1, kCuda0}));
}

TEST(DataParallelDevices, AutoMeansEveryGpuWithTheDeviceFlagsFirstOrTwoCpuReplicas) {
  EXPECT_EQ(ResolveDataParallelDevices("auto", "auto", 2), (std::vector<torch::Device>{kCuda0, kCuda1}));
  EXPECT_EQ(ResolveDataParallelDevices("auto", "cuda:1", 2), (std::vector<torch::Device>{kCuda1, kCuda0}));
  EXPECT_EQ(ResolveDataParallelDevices("auto", "cpu", 2), (std::vector<torch::Device>{kCpu, kCpu}));
  EXPECT_EQ(ResolveDataParallelDevices("auto", "auto", 0), (std::vector<torch::Device>{kCpu, kCpu}));
  EXPECT_NE(BadInputMessage([] { ResolveDataParallelDevices("auto", "cuda", 0); }).find("no CUDA device"),
            std::string::npos);
}

TEST(DataParallelDevices, RejectsUnknownDuplicateUnavailableAndMixedDevices) {
  auto message = [](const std::string& list, int visible) {
    return BadInputMessage([&] { ResolveDataParallelDevices(list, "auto", visible); });
  };
  EXPECT_NE(message("gpu0,gpu1", 2).find("'gpu0' is not a device"), std::string::npos);
  EXPECT_NE(message("cuda:0,cuda:0", 2).find("cuda:0 is listed twice"), std::string::npos);
  EXPECT_NE(message("cuda:0,cuda:2", 2).find("cuda:2 is not available: 2 CUDA device(s) are visible"),
            std::string::npos);
  EXPECT_NE(message("cuda:0,cuda:1", 0).find("no CUDA device is visible"), std::string::npos);
  EXPECT_NE(message("cpu,cuda:0", 1).find("mixes cpu and CUDA"), std::string::npos);
  EXPECT_NE(message("cpu,,cpu", 0).find("entry 2 is empty"), std::string::npos);
}

// ||a - b||_inf / ||b||_inf, the largest over the tensors.
double MaxRelativeDifference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const double scale = std::max(b[k].abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (a[k] - b[k]).abs().max().item<double>() / scale);
  }
  return worst;
}

class TwoCpuReplicas : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(3);
    single_ = MakeModel("lenet", kShape);
    primary_ = MakeModel("lenet", kShape);
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < single_->parameters().size(); ++k) primary_->parameters()[k].copy_(single_->parameters()[k]);
  }

  // 20 SGD steps (momentum 0.9) on random batches, one process with the whole batch against
  // two CPU replicas; odd batches (13, 7, 1) split unevenly, and a batch of one image leaves the
  // second replica without work. Returns the largest relative loss difference seen. With
  // `channels_last`, the replicas (not the one process) train in NHWC, as --channels-last makes them.
  double TrainBoth(const std::string& loss_scale, bool channels_last = false) {
    if (channels_last) ConvertToChannelsLast(*primary_);
    OptimizerOptions sgd;
    sgd.kind = "sgd";
    sgd.lr = 0.05;
    sgd.momentum = 0.9;
    FusedOptimizer single_optimizer(single_->parameters(), sgd), dp_optimizer(primary_->parameters(), sgd);
    GradScaler single_scaler(ParseLossScaling(loss_scale), kCpu), dp_scaler(ParseLossScaling(loss_scale), kCpu);
    dp_ = MakeDataParallel(primary_, DataParallelOptions{"mgpu", {kCpu, kCpu}, Precision::kFp32, [channels_last] {
                             std::shared_ptr<Classifier> replica = MakeModel("lenet", kShape);
                             if (channels_last) ConvertToChannelsLast(*replica);
                             return replica;
                           }});
    double worst_loss = 0;
    for (int step = 0; step < 20; ++step) {
      const int64_t batch = step == 5 ? 13 : step == 12 ? 1 : step == 19 ? 7 : 16;
      const torch::Tensor images = torch::randn({batch, 1, 28, 28});  // (B, 1, 28, 28)
      const torch::Tensor labels = torch::randint(0, 10, {batch});    // (B)

      single_optimizer.ZeroGrad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(single_->forward(images), labels);
      single_scaler.Scale(loss).backward();
      single_scaler.Step(single_optimizer);
      single_scaler.Update();

      dp_optimizer.ZeroGrad();
      const torch::Tensor dp_loss = dp_->ForwardBackward(ImagesInFormat(images, channels_last), labels, dp_scaler, 1.0);
      dp_scaler.Step(dp_optimizer);
      dp_scaler.Update();
      dp_->SyncReplicas();
      worst_loss = std::max(worst_loss, std::abs(dp_loss.item<double>() - loss.item<double>()) / loss.item<double>());
    }
    return worst_loss;
  }

  static constexpr ModelShape kShape{1, 10, 28, 28};
  // 20 steps; LeNet's longest gradient sum is conv1's weight, over 16 images' 28x28 outputs.
  const double tolerance_ = Float32ReorderingTolerance(20, 16 * 28 * 28);
  std::shared_ptr<Classifier> single_, primary_;
  std::unique_ptr<DataParallelEngine> dp_;
};

TEST_F(TwoCpuReplicas, TrainToTheParametersOfOneProcessWithTheGlobalBatch) {
  const double worst_loss = TrainBoth("none");
  EXPECT_LE(worst_loss, tolerance_) << "the returned loss is the global batch's mean";
  EXPECT_LE(MaxRelativeDifference(primary_->parameters(), single_->parameters()), tolerance_);

  RunSummary record;
  dp_->Report(record);
  const nlohmann::json summary = record.ToJson();
  EXPECT_EQ(summary["devices"], nlohmann::json::array({"cpu", "cpu"}));
  EXPECT_EQ(summary["dp_comm"], "copy");
  EXPECT_EQ(summary["dp_timing"]["forward_backward_calls"], 20);
  // The second replica did its share: 19 of the 20 batches had an image for it.
  EXPECT_GT(summary["dp_timing"]["forward_seconds"][1].get<double>(), 0);
  EXPECT_GT(summary["dp_timing"]["backward_seconds"][1].get<double>(), 0);
  EXPECT_EQ(summary["dp_timing"]["broadcasts"], 21) << "the first forward, then one after every step";
}

TEST_F(TwoCpuReplicas, ScaleTheirLossesLikeOneProcessUnderDynamicLossScaling) {
  TrainBoth("dynamic");
  EXPECT_LE(MaxRelativeDifference(primary_->parameters(), single_->parameters()), tolerance_);
}

TEST_F(TwoCpuReplicas, TrainInChannelsLastToTheParametersOfOneProcessInTheDefaultLayout) {
  const double worst_loss = TrainBoth("none", /*channels_last=*/true);
  EXPECT_LE(worst_loss, tolerance_);
  EXPECT_LE(MaxRelativeDifference(primary_->parameters(), single_->parameters()), tolerance_);
  for (const torch::Tensor& parameter : primary_->parameters()) {
    if (parameter.dim() != 4) continue;
    EXPECT_TRUE(parameter.is_contiguous(torch::MemoryFormat::ChannelsLast))
        << "the flat buffers' views keep the primary's layout";
    EXPECT_TRUE(parameter.grad().is_contiguous(torch::MemoryFormat::ChannelsLast)) << "and its gradients'";
  }
}

// A model that counts the forward passes that ran with CPU autocast on, whichever thread ran them.
class AutocastProbe : public Classifier {
 public:
  explicit AutocastProbe(std::shared_ptr<std::atomic<int>> autocast_forwards)
      : autocast_forwards_(std::move(autocast_forwards)), fc_(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor images) override {
    if (at::autocast::is_autocast_enabled(at::kCPU)) ++*autocast_forwards_;
    return fc_(images.flatten(1));
  }

 private:
  std::shared_ptr<std::atomic<int>> autocast_forwards_;
  torch::nn::Linear fc_;
};

TEST(DataParallel, EveryReplicaThreadRunsForwardUnderThePolicysAutocast) {
  auto counter = std::make_shared<std::atomic<int>>(0);
  auto make = [counter]() -> std::shared_ptr<Classifier> { return std::make_shared<AutocastProbe>(counter); };
  auto dp = MakeDataParallel(make(), DataParallelOptions{"mgpu", {kCpu, kCpu, kCpu}, Precision::kAmpBf16, make});
  GradScaler scaler(ParseLossScaling("none"), kCpu);
  dp->ForwardBackward(torch::randn({6, 1, 2, 2}), torch::randint(0, 2, {6}), scaler, 1.0);
  EXPECT_EQ(counter->load(), 3) << "autocast is thread-local: each replica's thread needs its own scope";
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU)) << "the caller's state is restored";
}

TEST(DataParallel, LibTorchsDataParallelIsRefusedOnCpuDevices) {
  const std::string message = BadInputMessage([] {
    MakeDataParallel(MakeModel("lenet", ModelShape{}),
                     DataParallelOptions{"libtorch", {kCpu, kCpu}, Precision::kFp32,
                                         [] { return MakeModel("lenet", ModelShape{}); }});
  });
  EXPECT_NE(message.find("needs CUDA devices"), std::string::npos) << message;
}

TEST(DataParallel, CudaGraphsAreRefusedOnCpuReplicasAndWithLibTorchsDataParallel) {
  auto make = [] { return MakeModel("lenet", ModelShape{}); };
  auto refusal = [&](const std::string& impl) {
    DataParallelOptions options{impl, {kCpu, kCpu}, Precision::kFp32, make};
    options.cuda_graphs = true;
    return BadInputMessage([&] { MakeDataParallel(make(), options); });
  };
  EXPECT_NE(refusal("mgpu").find("--cuda-graphs needs CUDA devices, but --dp-devices names cpu"), std::string::npos);
  EXPECT_NE(refusal("libtorch").find("--cuda-graphs cannot be combined with --dp-impl libtorch"), std::string::npos);
}

TEST(CapturedGraph, RefusesToCaptureOnTheCpuNamingTheFlag) {
  const std::string message = BadInputMessage([] {
    CapturedGraph({torch::zeros({2})}, [](const std::vector<torch::Tensor>& in) { return in[0] * 2; }, kCpu,
                  "--cuda-graphs");
  });
#ifdef MGPU_WITH_CUDA
  EXPECT_NE(message.find("--cuda-graphs needs CUDA devices, not cpu"), std::string::npos) << message;
#else
  EXPECT_NE(message.find("--cuda-graphs: this mgpu was built against a LibTorch without CUDA"), std::string::npos)
      << message;
#endif
}

}  // namespace
}  // namespace mgpu
