// mgpu-worker end to end: real processes, real files, the contract's outputs and exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

// The contract's summary.json fields (docs/RUN_FOLDER.md).
const std::vector<std::string> kSummaryFields = {
    "model", "dataset", "mode", "backend", "world_size", "devices", "precision", "loss_scale_mode",
    "batch_size", "num_workers", "epochs", "lr", "seed", "status", "error", "total_seconds",
    "test_accuracy", "test_loss", "per_class_accuracy", "peak_memory_bytes", "skipped_steps",
    "final_loss_scale", "param_checksum", "epochs_detail"};
const std::vector<std::string> kEpochFields = {
    "epoch", "train_loss", "seconds", "images_per_second", "data_wait_seconds", "compute_seconds",
    "comm_seconds", "test_loss", "test_accuracy"};

nlohmann::json ReadSummary(const std::string& folder) {
  return nlohmann::json::parse(ReadText(folder + "/summary.json"));
}

class WorkerCli : public ::testing::Test {
 protected:
  void SetUp() override { WriteTinyMnistLike(data_.path(), 640, 200); }

  // Runs mgpu-worker on the tiny data set with `extra` flags; output folder `name`.
  CommandResult Train(const std::string& name, std::vector<std::string> extra = {},
                      std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", data_.path(), "--device", "cpu",
                                     "--threads", "1", "--batch-size", "32", "--out", out_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, env);
  }

  TempDir data_;
  TempDir out_;
};

TEST_F(WorkerCli, TrainsAndWritesEveryContractOutput) {
  CommandResult result = Train("run", {"--epochs", "2", "--log-every", "5"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  for (const auto& field : kSummaryFields) EXPECT_TRUE(summary.contains(field)) << "missing " << field;
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["mode"], "single");
  EXPECT_EQ(summary["world_size"], 1);
  EXPECT_EQ(summary["devices"], nlohmann::json::array({"cpu"}));
  EXPECT_GT(summary["test_accuracy"].get<double>(), 90.0) << "the tiny data set is separable";
  EXPECT_EQ(summary["per_class_accuracy"].size(), 10u);
  EXPECT_GT(summary["peak_memory_bytes"][0].get<double>(), 0);
  EXPECT_GT(summary["param_checksum"].get<double>(), 0);
  ASSERT_EQ(summary["epochs_detail"].size(), 2u);
  for (const auto& field : kEpochFields) EXPECT_TRUE(summary["epochs_detail"][1].contains(field)) << field;
  EXPECT_EQ(summary["steps"], 40);  // 640 / 32 per epoch
  // Where the steps' time went: every phase is reported, and a one-process run has no all-reduce.
  const auto& phases = summary["epochs_detail"][1]["phase_seconds"];
  EXPECT_GT(phases["forward"].get<double>(), 0);
  EXPECT_GT(phases["backward"].get<double>(), 0);
  EXPECT_GT(phases["optimizer"].get<double>(), 0);
  EXPECT_EQ(phases["exposed_comm"].get<double>(), 0);
  EXPECT_LE(phases["forward"].get<double>() + phases["backward"].get<double>(),
            summary["epochs_detail"][1]["seconds"].get<double>());

  const std::string csv = ReadText(out_ / "run/metrics.csv");
  EXPECT_EQ(csv.rfind("step,epoch,loss,lr,loss_scale,step_seconds", 0), 0u) << csv;
  EXPECT_NE(csv.find(",input_seconds,forward_seconds,backward_seconds,exposed_comm_seconds,optimizer_seconds,"
                     "elapsed_seconds\n"),
            std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 40 / 5);
  // elapsed_seconds (the last column): the loop's wall clock, growing row by row, within the run's.
  std::istringstream rows(csv);
  std::string line;
  std::getline(rows, line);  // the header
  double previous = 0;
  while (std::getline(rows, line)) {
    const double elapsed = std::stod(line.substr(line.rfind(',') + 1));
    EXPECT_GT(elapsed, previous) << line;
    previous = elapsed;
  }
  EXPECT_LT(previous, summary["total_seconds"].get<double>());
  EXPECT_NE(ReadText(out_ / "run/logs/rank-0.log").find("rank source"), std::string::npos);
  EXPECT_NE(ReadText(out_ / "run/config.yaml").find("batch-size: 32"), std::string::npos);
  bool events = false;
  for (const auto& name : ListDirectory(out_ / "run")) {
    events |= name.rfind("events.out.tfevents.", 0) == 0 && FileSize(out_ / ("run/" + name)) > 0;
  }
  EXPECT_TRUE(events);
}

TEST_F(WorkerCli, SameSeedGivesTheSameParametersWhateverTheLoaderThreads) {
  ASSERT_EQ(Train("a", {"--max-steps", "15", "--seed", "5"}).exit_code, 0);
  ASSERT_EQ(Train("b", {"--max-steps", "15", "--seed", "5"}).exit_code, 0);
  ASSERT_EQ(Train("c", {"--max-steps", "15", "--seed", "5", "--num-workers", "3"}).exit_code, 0);
  ASSERT_EQ(Train("d", {"--max-steps", "15", "--seed", "6"}).exit_code, 0);
  const double a = ReadSummary(out_ / "a")["param_checksum"];
  EXPECT_EQ(a, ReadSummary(out_ / "b")["param_checksum"].get<double>());
  EXPECT_EQ(a, ReadSummary(out_ / "c")["param_checksum"].get<double>());
  EXPECT_NE(a, ReadSummary(out_ / "d")["param_checksum"].get<double>());
  EXPECT_EQ(ReadSummary(out_ / "a")["steps"], 15);
}

TEST_F(WorkerCli, ReportsTheCpuKernelsLibTorchRanWhichAtenCpuCapabilityLowers) {
  // .ci/run runs the suite a second time with ATEN_CPU_CAPABILITY=avx2: this is what shows that
  // the variable reaches the workers.
  ASSERT_EQ(Train("avx2", {"--max-steps", "1"}, {"ATEN_CPU_CAPABILITY=avx2"}).exit_code, 0);
  EXPECT_EQ(ReadSummary(out_ / "avx2")["cpu_capability"], "AVX2");
  EXPECT_NE(ReadText(out_ / "avx2/logs/rank-0.log").find("cpu kernels"), std::string::npos);
}

TEST_F(WorkerCli, DataOnDeviceAndChannelsLastTrainToTheSameParameters) {
  ASSERT_EQ(Train("loader", {"--max-steps", "15", "--seed", "5"}).exit_code, 0);
  const CommandResult resident = Train("resident", {"--max-steps", "15", "--seed", "5", "--data-on-device", "true"});
  ASSERT_EQ(resident.exit_code, 0) << resident.output;
  const CommandResult nhwc = Train("nhwc", {"--max-steps", "15", "--seed", "5", "--channels-last", "true"});
  ASSERT_EQ(nhwc.exit_code, 0) << nhwc.output;
  // The device-side batches normalize with other float32 operations, and NHWC convolutions sum
  // in another order: LeNet's conv1 weight gradient over 32 images' 28x28 outputs, 15 steps.
  const double tolerance = Float32ReorderingTolerance(15, 32 * 28 * 28);
  const double loader = ReadSummary(out_ / "loader")["param_checksum"];
  EXPECT_NEAR(ReadSummary(out_ / "resident")["param_checksum"].get<double>(), loader, tolerance * loader);
  EXPECT_NEAR(ReadSummary(out_ / "nhwc")["param_checksum"].get<double>(), loader, tolerance * loader);
  const std::string resident_log = ReadText(out_ / "resident/logs/rank-0.log");
  EXPECT_NE(resident_log.find("batches from the data set on the device"), std::string::npos);
  EXPECT_NE(resident_log.find("kept on the device as uint8 ("), std::string::npos) << "the start-up table's data loading";
}

TEST_F(WorkerCli, CudaGraphsOnTheCpuAreExitTwoBeforeTraining) {
  const CommandResult result = Train("graphs", {"--cuda-graphs", "true"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--cuda-graphs cannot be combined with --device cpu"), std::string::npos) << result.output;
}

TEST_F(WorkerCli, NumaBindingOnTheCpuIsExitTwoNamingTheWayOut) {
  const CommandResult result = Train("numa", {"--numa-binding", "exclusive"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("this rank trains on the CPU: use --numa-binding none"), std::string::npos)
      << result.output;
}

TEST_F(WorkerCli, ProfileStepsWritesAChromeTraceOfExactlyThoseSteps) {
  const CommandResult result = Train("trace", {"--max-steps", "6", "--profile-steps", "3-4"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string path = out_ / "trace/trace-rank0.json";
  ASSERT_TRUE(IsRegularFile(path)) << result.output;
  const nlohmann::json trace = nlohmann::json::parse(ReadText(path));  // whole, valid JSON
  std::map<std::string, int> names;
  for (const auto& event : trace["traceEvents"]) {
    if (event.contains("name") && event["name"].is_string()) ++names[event["name"].get<std::string>()];
  }
  EXPECT_EQ(names["mgpu step 3"], 1);
  EXPECT_EQ(names["mgpu step 4"], 1);
  EXPECT_EQ(names.count("mgpu step 2") + names.count("mgpu step 5"), 0u);
  EXPECT_GT(names["aten::convolution"], 0) << "LeNet's operators are in the trace";
  EXPECT_FALSE(PathExists(path + ".partial"));
  EXPECT_NE(ReadText(out_ / "trace/logs/rank-0.log").find("trace of steps 3-4 written to"), std::string::npos);
}

TEST_F(WorkerCli, ProfileWindowPastTheLastStepWritesWhatWasProfiled) {
  const CommandResult result = Train("short", {"--max-steps", "4", "--profile-steps", "3-10"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string trace = ReadText(out_ / "short/trace-rank0.json");
  EXPECT_NE(trace.find("mgpu step 4"), std::string::npos);
  EXPECT_EQ(trace.find("mgpu step 5"), std::string::npos);
}

TEST_F(WorkerCli, BadProfileStepsAreExitTwoSayingTheForm) {
  for (const std::string bad : {"5-3", "0-2", "x", "3-", "2-4-6"}) {
    const CommandResult result = Train("bad", {"--profile-steps", bad});
    EXPECT_EQ(result.exit_code, 2) << bad << ": " << result.output;
    EXPECT_NE(result.output.find("--profile-steps '" + bad + "'"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("FIRST"), std::string::npos) << result.output;
  }
}

TEST_F(WorkerCli, AugmentedRunsAreReproducibleWhateverTheLoaderThreads) {
  const std::vector<std::string> flags = {"--max-steps", "8", "--seed", "5", "--augment", "affine"};
  std::vector<std::string> threaded = flags;
  threaded.insert(threaded.end(), {"--num-workers", "3"});
  ASSERT_EQ(Train("a", flags).exit_code, 0);
  ASSERT_EQ(Train("b", threaded).exit_code, 0);
  ASSERT_EQ(Train("plain", {"--max-steps", "8", "--seed", "5"}).exit_code, 0);
  const double a = ReadSummary(out_ / "a")["param_checksum"];
  EXPECT_EQ(a, ReadSummary(out_ / "b")["param_checksum"].get<double>());
  EXPECT_NE(a, ReadSummary(out_ / "plain")["param_checksum"].get<double>()) << "augmentation changed nothing";
}

TEST_F(WorkerCli, ModelIsBuiltForTheAugmentedImageSize) {
  // Synthetic 3x32x32 images resized to 40x40: LeNet's first fully connected layer sees
  // 16 x 8 x 8 features, 136,886 parameters in all (for 32x32 it would be 83,126).
  CommandResult result = Train("run", {"--dataset", "synthetic", "--synthetic-train", "64",
                                       "--synthetic-test", "32", "--image-size", "32", "--augment",
                                       "resize", "--resize", "40", "--max-steps", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  EXPECT_EQ(summary["parameters"], 136886);
  EXPECT_EQ(summary["dataset"], "synthetic");
}

TEST_F(WorkerCli, GrayscaleSyntheticImagesBuildLeNetAsOnMnist) {
  // --synthetic-channels 1 at 28 px: LeNet's first convolution takes one channel, 61,706
  // parameters, as on Fashion-MNIST and in PyTorch's LeNet (three channels make 62,006).
  const std::vector<std::string> flags = {"--dataset", "synthetic", "--synthetic-train", "64", "--synthetic-test",
                                          "32", "--image-size", "28", "--max-steps", "2"};
  std::vector<std::string> gray = flags;
  gray.insert(gray.end(), {"--synthetic-channels", "1"});
  CommandResult result = Train("gray", gray);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(ReadSummary(out_ / "gray")["parameters"], 61706);
  ASSERT_EQ(Train("rgb", flags).exit_code, 0);
  EXPECT_EQ(ReadSummary(out_ / "rgb")["parameters"], 62006);
  std::vector<std::string> two = flags;
  two.insert(two.end(), {"--synthetic-channels", "2"});
  result = Train("two", two);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--synthetic-channels: 2 channels: synthetic images have 1 (grayscale) or 3 (RGB)"),
            std::string::npos) << result.output;
}

TEST_F(WorkerCli, ConfigFileSetsOptionsAndFlagsWin) {
  WriteBytes(out_ / "c.yaml", "batch_size: 64\noptimizer: sgd\nlr: 0.05\nmax-steps: 3\n");
  CommandResult result = Train("run", {"--config", out_ / "c.yaml", "--max-steps", "4"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  EXPECT_EQ(summary["optimizer"], "sgd");
  EXPECT_EQ(summary["batch_size"], 32) << "the flag wins over the file";
  EXPECT_EQ(summary["steps"], 4);
}

TEST_F(WorkerCli, MissingDataIsExitTwoNamingTheFolder) {
  CommandResult result = RunCommand({MGPU_WORKER_BIN, "--data-dir", data_ / "absent", "--device", "cpu",
                                     "--out", out_ / "run"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(data_ / "absent"), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_NE(summary["error"].get<std::string>().find("does not exist"), std::string::npos);
}

TEST_F(WorkerCli, TruncatedDataFileIsExitTwoNamingTheFile) {
  const std::string images = data_ / "train-images-idx3-ubyte.gz";
  WriteGzip(images, IdxBytes({640, 28, 28}, std::string(1000, 'x')));
  CommandResult result = Train("run");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(images + ": truncated"), std::string::npos) << result.output;
}

TEST_F(WorkerCli, BadFlagsAndConfigKeysAreExitTwoBeforeTraining) {
  CommandResult unknown_flag = Train("x", {"--bogus", "1"});
  EXPECT_EQ(unknown_flag.exit_code, 2);
  EXPECT_NE(unknown_flag.output.find("--bogus"), std::string::npos) << unknown_flag.output;

  CommandResult bad_value = Train("y", {"--batch-size", "many"});
  EXPECT_EQ(bad_value.exit_code, 2);
  EXPECT_NE(bad_value.output.find("--batch-size: 'many' is not an integer"), std::string::npos) << bad_value.output;

  WriteBytes(out_ / "bad.yaml", "epochs: 1\nlearning-rate: 0.1\n");
  CommandResult bad_key = Train("z", {"--config", out_ / "bad.yaml"});
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.output.find("unknown key 'learning-rate'"), std::string::npos) << bad_key.output;
  EXPECT_FALSE(PathExists(out_ / "z")) << "nothing is written for a run that never started";
}

TEST_F(WorkerCli, ThreadCountsPastTheirBoundsAreExitTwoBeforeAnyThreadStarts) {
  const CommandResult workers = Train("w", {"--num-workers", "100000"});
  EXPECT_EQ(workers.exit_code, 2) << workers.output;
  EXPECT_NE(workers.output.find("--num-workers 100000 is above the limit of 256"), std::string::npos)
      << workers.output;
  const CommandResult threads = Train("t", {"--threads", "100000"});
  EXPECT_EQ(threads.exit_code, 2) << threads.output;
  EXPECT_NE(threads.output.find("--threads 100000 is above this machine's"), std::string::npos) << threads.output;
}

TEST_F(WorkerCli, AConfigFolderAnOutFileAndArgumentsAfterDoubleDashAreExitTwoNamingThem) {
  const CommandResult folder = Train("c", {"--config", out_.path()});
  EXPECT_EQ(folder.exit_code, 2) << folder.output;
  EXPECT_NE(folder.output.find("config file " + out_.path() + " is a folder"), std::string::npos) << folder.output;

  WriteBytes(out_ / "taken", "a file");
  const CommandResult out_file = Train("taken");
  EXPECT_EQ(out_file.exit_code, 2) << out_file.output;
  EXPECT_NE(out_file.output.find("--out " + out_ / "taken" + " is an existing file"), std::string::npos)
      << out_file.output;

  const CommandResult dashes = Train("d", {"--", "--data-dir", data_.path()});
  EXPECT_EQ(dashes.exit_code, 2) << dashes.output;
  EXPECT_NE(dashes.output.find("'--data-dir' follows `--`"), std::string::npos) << dashes.output;
  EXPECT_EQ(dashes.output.find("did you mean"), std::string::npos) << dashes.output;
}

TEST_F(WorkerCli, SingleModeRefusesAMultiRankEnvironment) {
  CommandResult result = Train("run", {}, {"RANK=0", "WORLD_SIZE=2"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("world size is 2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("torchrun"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("does not switch to ddp by itself"), std::string::npos) << result.output;
}

TEST_F(WorkerCli, SeedsAmpOnTheCpuIsAmpBf16AndTheStartUpTableSaysWhy) {
  const CommandResult amp = Train("amp", {"--amp", "--max-steps", "2"});
  ASSERT_EQ(amp.exit_code, 0) << amp.output;
  EXPECT_EQ(ReadSummary(out_ / "amp")["precision"], "amp-bf16");
  EXPECT_NE(ReadText(out_ / "amp/config.yaml").find("precision: amp-bf16"), std::string::npos);
  EXPECT_NE(ReadText(out_ / "amp/logs/rank-0.log").find("amp-bf16 (--amp on CPU means amp-bf16: float16 autocast"),
            std::string::npos) << amp.output;

  const CommandResult named = Train("named", {"--precision", "amp-fp16", "--max-steps", "1"});
  ASSERT_EQ(named.exit_code, 0) << named.output;
  EXPECT_EQ(ReadSummary(out_ / "named")["precision"], "amp-fp16");
  EXPECT_EQ(Count(named.output, "--precision amp-fp16 on CPU"), 1u) << named.output;
}

// 640 images in batches of 32: 20 steps per epoch; a 7-step smoke run.
TEST_F(WorkerCli, SmokeRunEvaluatesASampleLogsRowsAndItsProgressEndsAtMaxSteps) {
  const CommandResult smoke =
      Train("smoke", {"--max-steps", "7", "--eval-max-samples", "50", "--progress", "lines"});
  ASSERT_EQ(smoke.exit_code, 0) << smoke.output;
  const nlohmann::json summary = ReadSummary(out_ / "smoke");
  EXPECT_EQ(summary["eval_samples"], 50);
  EXPECT_EQ(summary["test_samples"], 200);
  EXPECT_NE(smoke.output.find("of 50 of the 200 test images"), std::string::npos) << smoke.output;
  EXPECT_EQ(LineCount(out_ / "smoke/metrics.csv"), 1 + 7) << "unset --log-every: a row per step of 7";
  EXPECT_NE(smoke.output.find("step 3/7 "), std::string::npos) << smoke.output;
  EXPECT_EQ(smoke.output.find("/20 "), std::string::npos) << "the count ends at --max-steps: " << smoke.output;
  EXPECT_EQ(smoke.output.find("no metrics row"), std::string::npos) << smoke.output;
}

TEST_F(WorkerCli, ALogEveryThatWritesNoRowIsWarnedAboutAndTheBarShowsTheLossAnyway) {
  const CommandResult quiet = Train("quiet", {"--max-steps", "7", "--log-every", "50", "--progress", "lines"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(LineCount(out_ / "quiet/metrics.csv"), 1);
  EXPECT_NE(quiet.output.find("--log-every 50 writes no metrics row before this run ends at step 7"), std::string::npos)
      << quiet.output;
  EXPECT_NE(quiet.output.find("step 3/7 loss "), std::string::npos) << quiet.output;
  EXPECT_EQ(quiet.output.find("loss -"), std::string::npos) << "the CPU's loss is there to show: " << quiet.output;
}

TEST_F(WorkerCli, ImageSizeOnFashionMnistIsExitTwoNamingImgSize) {
  const CommandResult result = Train("sized", {"--image-size", "300", "--max-steps", "1"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--img-size 300"), std::string::npos) << result.output;
  EXPECT_FALSE(PathExists(out_ / "sized"));
}

TEST_F(WorkerCli, WandbIsExitTwoSayingMgpuWritesTensorBoardEvents) {
  const CommandResult result = Train("wandb", {"--wandb"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("writes TensorBoard events"), std::string::npos) << result.output;
}

TEST_F(WorkerCli, ARunThatFailsItsDataCheckLeavesNoEventFile) {
  const CommandResult result = RunCommand({MGPU_WORKER_BIN, "--data-dir", data_ / "absent", "--device", "cpu",
                                           "--out", out_ / "run", "--tensorboard-log", out_ / "tb"});
  ASSERT_EQ(result.exit_code, 2) << result.output;
  for (const std::string& folder : {out_ / "run", out_ / "tb/run"}) {
    if (!PathExists(folder)) continue;
    for (const auto& name : ListDirectory(folder)) {
      EXPECT_NE(name.rfind("events.out.tfevents.", 0), 0u) << folder << "/" << name;
    }
  }
}

TEST_F(WorkerCli, HelpListsOptionsAndExitsZero) {
  CommandResult result = RunCommand({MGPU_WORKER_BIN, "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.output.find("--batch-size"), std::string::npos);
  EXPECT_NE(result.output.find("--num-workers"), std::string::npos);
}

TEST_F(WorkerCli, AmpBf16TrainsAndTheSummaryNamesThePolicy) {
  CommandResult result = Train("run", {"--precision", "amp-bf16", "--epochs", "2", "--log-every", "5"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  EXPECT_EQ(summary["precision"], "amp-bf16");
  EXPECT_EQ(summary["loss_scale_mode"], "none");
  EXPECT_EQ(summary["skipped_steps"], 0);
  EXPECT_EQ(summary["final_loss_scale"], 1.0);
  EXPECT_GT(summary["test_accuracy"].get<double>(), 90.0);
}

TEST_F(WorkerCli, SeedStyleDtypeAndAmpChooseThePolicy) {
  ASSERT_EQ(Train("bf16", {"--dtype", "bf16", "--amp", "--max-steps", "3"}).exit_code, 0);
  EXPECT_EQ(ReadSummary(out_ / "bf16")["precision"], "amp-bf16");
  EXPECT_NE(ReadText(out_ / "bf16/config.yaml").find("precision: amp-bf16"), std::string::npos);
  // SGD: Adam's float16 moments would turn the loss NaN within these steps (see the next test).
  ASSERT_EQ(Train("fp16", {"--dtype", "fp16", "--optimizer", "sgd", "--max-steps", "3"}).exit_code, 0);
  EXPECT_EQ(ReadSummary(out_ / "fp16")["precision"], "fp16");

  CommandResult no_amp = Train("x", {"--dtype", "bf16"});
  EXPECT_EQ(no_amp.exit_code, 2);
  EXPECT_NE(no_amp.output.find("--amp"), std::string::npos) << no_amp.output;
  CommandResult conflict = Train("y", {"--precision", "amp-bf16", "--dtype", "fp16"});
  EXPECT_EQ(conflict.exit_code, 2);
  EXPECT_NE(conflict.output.find("conflicts with --dtype fp16"), std::string::npos) << conflict.output;
}

// o2 rather than fp16: on CPU, LibTorch 2.11's fused SGD kernel gives float16 tensors of more
// than a few elements far too small updates, and Adam's float16 state underflows (eps 1e-8 is
// 0 in float16); o2 steps float32 masters and is the float16 policy that trains on CPU.
TEST_F(WorkerCli, O2WithDynamicScalingAndClippingTrainsAndRecordsTheScale) {
  CommandResult result = Train("o2", {"--precision", "o2", "--loss-scale", "dynamic", "--log-every", "5",
                                      "--grad-clip", "10", "--epochs", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "o2");
  EXPECT_EQ(summary["precision"], "o2");
  EXPECT_EQ(summary["loss_scale_mode"], "dynamic");
  EXPECT_GT(summary["test_accuracy"].get<double>(), 80.0);
  const double scale = summary["final_loss_scale"].get<double>();
  EXPECT_GE(scale, 1.0);
  EXPECT_LE(scale, 65536.0);
  const std::string csv = ReadText(out_ / "o2/metrics.csv");
  EXPECT_NE(csv.find(",65536,"), std::string::npos) << "the first row carries the initial scale\n" << csv;
}

TEST_F(WorkerCli, StaticScaleThatOverflowsSkipsEveryStep) {
  // 1e10 × the loss's gradient overflows float16 in the backward pass: every step is skipped,
  // so the parameters stay at their initialization whatever the learning rate.
  for (const std::string lr : {"0.001", "0.1"}) {
    CommandResult result = Train("lr" + lr, {"--precision", "fp16", "--loss-scale", "1e10", "--lr", lr});
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  const nlohmann::json a = ReadSummary(out_ / "lr0.001"), b = ReadSummary(out_ / "lr0.1");
  EXPECT_EQ(a["loss_scale_mode"], "static");
  EXPECT_EQ(a["skipped_steps"], 20);
  EXPECT_EQ(a["final_loss_scale"], 1e10);
  EXPECT_EQ(a["param_checksum"], b["param_checksum"]);
}

TEST_F(WorkerCli, NonFiniteLossWithStopIsExitThreeNamingTheStep) {
  CommandResult result = Train("run", {"--precision", "amp-bf16", "--optimizer", "sgd", "--lr", "1e6",
                                       "--on-nonfinite", "stop"});
  ASSERT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("at step "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("loss scale 1"), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["exit_code"], 3);
}

TEST_F(WorkerCli, NonFiniteLossWithSkipSkipsThatStepAndTrainsOn) {
  CommandResult poisoned = Train("poisoned", {"--optimizer", "sgd", "--lr", "0.05", "--on-nonfinite", "skip"},
                                 {"MGPU_TEST_FAULTS=nonfinite-at-step=3"});
  ASSERT_EQ(poisoned.exit_code, 0) << poisoned.output;
  const nlohmann::json summary = ReadSummary(out_ / "poisoned");
  EXPECT_EQ(summary["skipped_steps"], 1);
  EXPECT_TRUE(std::isfinite(summary["param_checksum"].get<double>()));
  EXPECT_TRUE(std::isfinite(summary["test_loss"].get<double>()));
  // The NaN step changed nothing: the run differs from a clean one by that step's update only.
  CommandResult clean = Train("clean", {"--optimizer", "sgd", "--lr", "0.05", "--on-nonfinite", "skip"});
  ASSERT_EQ(clean.exit_code, 0) << clean.output;
  EXPECT_EQ(ReadSummary(out_ / "clean")["skipped_steps"], 0);
  EXPECT_NE(ReadSummary(out_ / "clean")["param_checksum"], summary["param_checksum"]);
}

TEST_F(WorkerCli, NonFiniteLossWithStopIsExitThreeAtThatStep) {
  CommandResult result = Train("run", {"--on-nonfinite", "stop"}, {"MGPU_TEST_FAULTS=nonfinite-at-step=3"});
  ASSERT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("loss became nan at step 3 "), std::string::npos) << result.output;
}

TEST_F(WorkerCli, SkippingStepsOfAModelThatBrokeAnywayIsExitThree) {
  // At lr 1e6 the first update sends the weights so far that every later loss is NaN: skipping
  // those steps cannot bring the model back, and the run must not end as a success.
  CommandResult result = Train("run", {"--precision", "amp-bf16", "--optimizer", "sgd", "--lr", "1e6",
                                       "--on-nonfinite", "skip"});
  ASSERT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("test loss became nan after epoch 1"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("-nan"), std::string::npos) << "NaN prints one way on every CPU\n" << result.output;
  EXPECT_NE(result.output.find("steps skipped so far"), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "run");
  EXPECT_EQ(summary["exit_code"], 3);
  EXPECT_GT(summary["skipped_steps"].get<int64_t>(), 0);
}

TEST_F(WorkerCli, TestNonFiniteHookRefusesModesItCannotPoison) {
  CommandResult result = Train("run", {"--mode", "dp", "--dp-devices", "cpu,cpu"}, {"MGPU_TEST_FAULTS=nonfinite-at-step=2"});
  ASSERT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("MGPU_TEST_FAULTS nonfinite-at-step works with --mode single"), std::string::npos)
      << result.output;
}

TEST_F(WorkerCli, Fp16WithAdamIsWarnedAboutAndItsBrokenModelIsExitThree) {
  CommandResult result = Train("run", {"--precision", "fp16", "--optimizer", "adam", "--on-nonfinite", "skip"});
  EXPECT_NE(result.output.find("keeps Adam's moments in float16"), std::string::npos) << result.output;
  ASSERT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("test loss became"), std::string::npos) << result.output;
}

TEST_F(WorkerCli, BadPrecisionOptionsAreExitTwoNamingTheFlag) {
  CommandResult scale = Train("a", {"--loss-scale", "-1"});
  EXPECT_EQ(scale.exit_code, 2);
  EXPECT_NE(scale.output.find("--loss-scale: '-1' is not one of: none, dynamic"), std::string::npos) << scale.output;
  CommandResult policy = Train("b", {"--precision", "fp8"});
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_NE(policy.output.find("amp-fp16, amp-bf16, fp16, o2"), std::string::npos) << policy.output;
  CommandResult nonfinite = Train("c", {"--on-nonfinite", "ignore"});
  EXPECT_EQ(nonfinite.exit_code, 2);
  EXPECT_NE(nonfinite.output.find("--on-nonfinite"), std::string::npos) << nonfinite.output;
  CommandResult snapshot = Train("d", {"--memory-snapshot", out_ / "s.pickle"});
  EXPECT_EQ(snapshot.exit_code, 2);
  EXPECT_NE(snapshot.output.find("--memory-snapshot"), std::string::npos) << snapshot.output;
  EXPECT_NE(snapshot.output.find("--device cuda"), std::string::npos) << snapshot.output;
}

// The foundation's acceptance run: one epoch of LeNet on the real Fashion-MNIST (Debian's
// dataset-fashion-mnist, installed by `make deps`) reaches at least 84% test accuracy.
TEST(WorkerOnFashionMnist, OneEpochReachesAtLeast84Percent) {
  const std::string data = "/usr/share/datasets/fashion-mnist";
  ASSERT_TRUE(PathExists(data + "/train-images-idx3-ubyte.gz"))
      << data << " is missing: run `make deps` (it installs dataset-fashion-mnist)";
  TempDir out;
  CommandResult result = RunCommand({MGPU_WORKER_BIN, "--model", "lenet", "--dataset", "fashion-mnist",
                                     "--epochs", "1", "--device", "cpu", "--num-workers", "2",
                                     "--out", out / "run"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out / "run");
  for (const auto& field : kSummaryFields) EXPECT_TRUE(summary.contains(field)) << "missing " << field;
  EXPECT_GE(summary["test_accuracy"].get<double>(), 84.0);
  EXPECT_EQ(summary["parameters"], 61706);
  EXPECT_EQ(summary["class_names"][9], "Ankle boot");
}

// Mixed precision's acceptance run: one epoch of LeNet under amp-bf16 on CPU lands within one
// point of the same run in fp32 (same seed, same batches).
TEST(WorkerOnFashionMnist, AmpBf16IsWithinOnePointOfFp32) {
  const std::string data = "/usr/share/datasets/fashion-mnist";
  ASSERT_TRUE(PathExists(data + "/train-images-idx3-ubyte.gz"))
      << data << " is missing: run `make deps` (it installs dataset-fashion-mnist)";
  TempDir out;
  std::map<std::string, double> accuracy;
  for (const std::string precision : {"fp32", "amp-bf16"}) {
    CommandResult result = RunCommand({MGPU_WORKER_BIN, "--epochs", "1", "--device", "cpu", "--num-workers", "2",
                                       "--precision", precision, "--out", out / precision});
    ASSERT_EQ(result.exit_code, 0) << result.output;
    accuracy[precision] = ReadSummary(out / precision)["test_accuracy"].get<double>();
  }
  EXPECT_NEAR(accuracy["amp-bf16"], accuracy["fp32"], 1.0);
  std::printf("test accuracy: fp32 %.2f%%, amp-bf16 %.2f%%\n", accuracy["fp32"], accuracy["amp-bf16"]);
}

}  // namespace
}  // namespace mgpu
