// GPU checks: skipped, saying so, on machines without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cuda/pci_bus_id.h"
#include "data/nvjpeg_library.h"
#include "tests/support/image_files.h"
#include "tests/support/test_support.h"
#include "worker/cpu_topology.h"
#include "worker/deferred_rows.h"
#include "worker/numa_binding.h"

#ifdef MGPU_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#endif

namespace mgpu {
namespace {

using namespace mgpu::testing;

// mgpu-worker on the GPU, on a tiny MNIST-like data set, into dir_/run.
class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    WriteTinyMnistLike(dir_ / "data", 640, 200);
  }
  CommandResult Train(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", dir_ / "data", "--device", "cuda",
                                     "--out", dir_ / "run"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv);
  }
  TempDir dir_;
};

TEST_F(CudaTraining, TrainsOnTheGpuAndReportsAllocatorPeakMemory) {
  CommandResult result = Train({"--epochs", "2", "--num-workers", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto summary = nlohmann::json::parse(ReadText(dir_ / "run/summary.json"));
  EXPECT_EQ(summary["devices"][0], "cuda:0");
  EXPECT_GT(summary["peak_memory_bytes"][0].get<double>(), 0);
  EXPECT_GT(summary["test_accuracy"].get<double>(), 90.0);
  // Phases measured with CUDA events: device time, within the epoch's wall time.
  const auto& epoch = summary["epochs_detail"][1];
  EXPECT_GT(epoch["phase_seconds"]["forward"].get<double>(), 0);
  EXPECT_GT(epoch["phase_seconds"]["backward"].get<double>(), 0);
  EXPECT_LT(epoch["phase_seconds"]["forward"].get<double>() + epoch["phase_seconds"]["backward"].get<double>(),
            epoch["seconds"].get<double>());
}

// --numa-binding node: the rank runs on its GPU's NUMA node's CPUs among those it may use, and
// the log names them with the GPU's PCI address.
TEST_F(CudaTraining, NumaBindingNodeKeepsTheRankOnItsGpusNodeAndSaysWhich) {
  CommandResult result = Train({"--max-steps", "5", "--num-workers", "2", "--numa-binding", "node"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string log = ReadText(dir_ / "run/logs/rank-0.log");
  const std::string bus_id = CudaPciBusId(0);
  const CpuBinding expected =
      PlanCpuBinding(NumaBinding::kNode, ReadCpuTopology(kSysfsRoot, AllowedCpus()),
                     RankPlacement{PciDeviceNumaNode(kSysfsRoot, bus_id), 0, 1});
  EXPECT_NE(log.find("--numa-binding node: CPUs " + FormatCpuList(expected.cpus) + " ("), std::string::npos) << log;
  EXPECT_NE(log.find("cuda:0 at " + bus_id), std::string::npos) << log;
}

// A metrics row is read without draining the device: it is complete only once the device has
// run the work queued before it, and then holds the values the device computed.
TEST_F(CudaTraining, MetricsRowsCompleteOnlyOnceTheDevicePassesThem) {
#ifndef MGPU_WITH_CUDA
  GTEST_SKIP() << "built without CUDA support";
#else
  const torch::Device device(torch::kCUDA, 0);
  DeferredRows rows(device);
  StepTimeline timeline(device);
  at::cuda::sleep(int64_t{1} << 30);  // a kernel that spins about 0.5 s (2^30 cycles at ~2 GHz)
  timeline.Mark(StepPhase::kBackward);
  const auto loss = torch::full({}, 2.5, torch::TensorOptions().device(device));  // queued behind the spin
  DeferredRows::HostPart host;
  host.steps = 1;
  host.images = 64;
  rows.Add(host, loss, torch::ones({}, torch::TensorOptions().device(device)), timeline.Cut(), {});
  at::cuda::CUDAEvent after_add;
  after_add.record(at::cuda::getCurrentCUDAStream(device.index()));
  ASSERT_FALSE(after_add.query()) << "adding a row waited for the device";
  EXPECT_TRUE(rows.Take(/*wait=*/false).empty()) << "the device is still running the queued work";
  const auto done = rows.Take(/*wait=*/true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FLOAT_EQ(done[0].metrics.loss, 2.5);
  EXPECT_GT(done[0].metrics.phase_seconds[StepPhase::kBackward], 0.1) << "device time of the queued work";
#endif
}

TEST_F(CudaTraining, ProfileStepsTraceHoldsTheStepsKernels) {
  CommandResult result = Train({"--max-steps", "5", "--profile-steps", "2-3"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto trace = nlohmann::json::parse(ReadText(dir_ / "run/trace-rank0.json"));
  int kernels = 0;
  std::set<std::string> step_ranges;  // Kineto writes a range more than once (host and device side)
  for (const auto& event : trace["traceEvents"]) {
    kernels += event.value("cat", "") == "kernel";
    const std::string name = event.value("name", "");
    if (name.rfind("mgpu step ", 0) == 0) step_ranges.insert(name);
  }
  EXPECT_GT(kernels, 20) << "the CUDA activity is in the trace";
  EXPECT_EQ(step_ranges, (std::set<std::string>{"mgpu step 2", "mgpu step 3"}));
  EXPECT_NE(ReadText(dir_ / "run/logs/rank-0.log").find("per step, host time:"), std::string::npos);
}

}  // namespace
}  // namespace mgpu

namespace mgpu {
namespace {

using namespace mgpu::testing;

// Trains with `flags` on cuda:0 into dir/single, then as two NCCL DDP ranks on cuda:0 and cuda:1
// (torchrun's environment) into dir/ddp; fails the test where any of them fails.
void TrainOnOneGpuAndOnTwo(const TempDir& dir, const std::vector<std::string>& flags) {
  std::vector<std::string> single = {MGPU_WORKER_BIN, "--device", "cuda:0", "--out", dir / "single"};
  single.insert(single.end(), flags.begin(), flags.end());
  CommandResult reference = RunCommand(single);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;

  const int port = FreeLocalPort();
  std::vector<std::unique_ptr<BackgroundCommand>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--mode", "ddp", "--backend", "nccl", "--out", dir / "ddp"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    std::vector<std::string> environment = TorchrunEnvironment(rank, 2, port);
    environment.push_back("NCCL_NVLS_ENABLE=0");
    ranks.push_back(std::make_unique<BackgroundCommand>(argv, environment));
  }
  for (auto& rank : ranks) {
    CommandResult result = rank->Wait();
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
}

// DDP over NCCL on two GPUs trains to the parameters of one GPU with the global batch (up to
// the GPUs' non-deterministic summation order), and every rank ends with the same parameters.
TEST(CudaDdp, NcclOnTwoGpusMatchesOneGpuWithTheGlobalBatch) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: NCCL DDP test skipped";
  TempDir dir;
  WriteTinyMnistLike(dir / "data", 1280, 200);
  const std::vector<std::string> common = {"--data-dir", dir / "data", "--optimizer", "sgd", "--lr", "0.05",
                                           "--seed", "4", "--max-steps", "30", "--epochs", "5", "--batch-size", "64"};
  ASSERT_NO_FATAL_FAILURE(TrainOnOneGpuAndOnTwo(dir, common));
  const auto ddp = nlohmann::json::parse(ReadText(dir / "ddp/summary.json"));
  const auto one = nlohmann::json::parse(ReadText(dir / "single/summary.json"));
  EXPECT_EQ(ddp["backend"], "nccl");
  EXPECT_EQ(ddp["devices"], nlohmann::json::array({"cuda:0", "cuda:1"}));
  EXPECT_EQ(ddp["rank_param_checksums"][0], ddp["rank_param_checksums"][1]);
  EXPECT_NEAR(ddp["param_checksum"].get<double>(), one["param_checksum"].get<double>(),
              1e-4 * one["param_checksum"].get<double>());
  // The all-reduces ran on the device and the exposed part of them was measured there.
  const auto& phases = ddp["epochs_detail"][0]["phase_seconds"];
  EXPECT_GT(phases["collectives_total"].get<double>(), 0);
  EXPECT_GE(phases["exposed_comm"].get<double>(), 0);
}

// The same from JPEGs decoded on the GPU (--decode gpu), where the steps and the collectives run on
// high-priority streams beside the decode's (cuda/step_stream.h). The loader threads decode
// nothing (--cpu-assist false), so both runs see nvJPEG's pixels for every sample.
TEST(CudaDdp, NcclOnTwoGpusFromJpegsDecodedOnTheGpuMatchesOneGpuWithTheGlobalBatch) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: NCCL DDP test skipped";
  if (const std::string why = WhyNoNvjpeg(); !why.empty()) GTEST_SKIP() << "no nvJPEG: " << why;
  TempDir dir;
  WriteColourImageFolder(dir / "jpegs", ColourSetOptions{4, 80, 8, 40, 120, 5});  // 320: 5 batches of 64
  const std::vector<std::string> common = {
      "--dataset", "imagefolder", "--data-dir", dir / "jpegs", "--data-loading", "stream", "--decode", "gpu",
      "--cpu-assist", "false", "--augment", "rrc-flip", "--image-size", "32", "--resize", "32", "--model", "lenet",
      "--num-workers", "2", "--optimizer", "sgd", "--lr", "0.05", "--seed", "4", "--max-steps", "12", "--epochs", "3",
      "--batch-size", "64"};
  ASSERT_NO_FATAL_FAILURE(TrainOnOneGpuAndOnTwo(dir, common));
  const auto ddp = nlohmann::json::parse(ReadText(dir / "ddp/summary.json"));
  const auto one = nlohmann::json::parse(ReadText(dir / "single/summary.json"));
  EXPECT_GT(ddp["gpu_decode"]["images"].get<int64_t>(), 0);
  EXPECT_EQ(ddp["rank_param_checksums"][0], ddp["rank_param_checksums"][1]);
  EXPECT_NEAR(ddp["param_checksum"].get<double>(), one["param_checksum"].get<double>(),
              1e-4 * std::abs(one["param_checksum"].get<double>()));
  EXPECT_NE(ReadText(dir / "ddp/logs/rank-0.log").find("the step's stream at high priority"), std::string::npos);
}

// What a failed rank says as it lets go of its peers (ddp/nccl_communicator.cpp).
constexpr char kAbandonedCommunicator[] = "this rank failed; aborting the communicator rather than waiting for the other ranks";

// Two NCCL DDP workers on a tiny MNIST-like set in `dir`, rank k with MGPU_TEST_FAULTS=faults[k].
// Rank 1 runs under `timeout`, which turns a hang into a failure (exit 137); rank 0 runs bare, so
// that the SIGKILL it gets when the test ends reaches the worker itself.
std::vector<std::unique_ptr<BackgroundCommand>> StartTwoFaultyNcclRanks(const TempDir& dir,
                                                                        const std::vector<std::string>& faults) {
  WriteTinyMnistLike(dir / "data", 1280, 200);
  const int port = FreeLocalPort();
  std::vector<std::unique_ptr<BackgroundCommand>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--mode", "ddp", "--backend", "nccl", "--data-dir", dir / "data",
                                     "--batch-size", "64", "--epochs", "100", "--collective-timeout", "600",
                                     "--out", dir / "run"};
    if (rank == 1) argv.insert(argv.begin(), {"timeout", "--signal=KILL", "60"});
    std::vector<std::string> environment = TorchrunEnvironment(rank, 2, port);
    environment.push_back("NCCL_NVLS_ENABLE=0");
    environment.push_back("MGPU_TEST_FAULTS=" + faults[rank]);
    ranks.push_back(std::make_unique<BackgroundCommand>(argv, environment));
  }
  return ranks;
}

// A rank that fails in the middle of a step, its gradients' all-reduces launched and never joined
// by the other rank, still exits: its NCCL communicator is aborted rather than destroyed, since
// ncclCommDestroy would first finish the communicator's outstanding work (ncclCommFinalize).
TEST(CudaDdp, ARankThatFailsMidStepExitsThoughItsAllReducesCannotFinish) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: NCCL DDP test skipped";
  TempDir dir;
  // Rank 0 stops after step 6; rank 1 launches step 7's all-reduces, then fails.
  auto ranks = StartTwoFaultyNcclRanks(dir, {"hang-at-step=6,hang-rank=0", "fail-at-step=7,fail-rank=1"});
  const CommandResult failed = ranks[1]->Wait();  // rank 0 hangs on purpose; it is killed at the end
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find("step 7 failed on purpose"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find(kAbandonedCommunicator), std::string::npos) << failed.output;
}

// A rank that fails while its peer goes on into the next step's all-reduces exits too, though
// every collective it started has finished: ncclCommDestroy synchronizes with the peers, which
// wait in a collective of their own until the collective timeout, so a failed rank aborts its
// communicator instead (Communicator::Abandon).
TEST(CudaDdp, ARankThatFailsExitsWhileItsPeerWaitsInTheNextCollective) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: NCCL DDP test skipped";
  TempDir dir;
  // Rank 0 trains on into step 8; rank 1 fails after step 7's all-reduces, which rank 0 joins.
  auto ranks = StartTwoFaultyNcclRanks(dir, {"", "fail-at-step=7,fail-rank=1"});
  const CommandResult failed = ranks[1]->Wait();  // rank 0 waits for rank 1; it is killed at the end
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find("step 7 failed on purpose"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find(kAbandonedCommunicator), std::string::npos) << failed.output;
}

}  // namespace
}  // namespace mgpu
