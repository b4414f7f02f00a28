// The seed experiments' own command lines, run by mgpu-worker on the CPU with their flags as
// written (plus a step limit): the precision experiment (VGG-19 / ResNet-18, `--dtype bf16 --amp
// --loss-scale`), AlexNet at 227 px with TensorBoard logging, and the MNIST methods comparison
// (`--mode base|DP`, `--num_workers`). They train on a tiny MNIST-like set: CIFAR-10's loader
// takes only the real 10,000-image files, which are made here for LeNet alone, in the layout
// torchvision downloads. A spelling that means nothing exits 2 naming the closest valid one.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "models/model_factory.h"
#include "tests/support/saved_models.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

bool HasEventFile(const std::string& folder) {
  if (!IsDirectory(folder)) return false;
  for (const std::string& name : ListDirectory(folder)) {
    if (name.rfind("events.out.tfevents.", 0) == 0) return true;
  }
  return false;
}

class SeedCommandLines : public ::testing::Test {
 protected:
  // 32 px: VGG's five poolings need at least that.
  void SetUp() override { WriteTinyMnistLike(mnist_.path(), 64, 20, 32); }

  // The seed's flags, then what keeps the run short and on the CPU.
  CommandResult Run(const std::string& name, std::vector<std::string> seed_flags, int max_steps = 2) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN};
    argv.insert(argv.end(), seed_flags.begin(), seed_flags.end());
    argv.insert(argv.end(), {"--device", "cpu", "--threads", "1", "--max-steps", std::to_string(max_steps), "--out",
                             out_ / name});
    return RunCommand(argv);
  }

  TempDir mnist_;
  TempDir out_;
};

TEST_F(SeedCommandLines, PrecisionExperimentRunsVerbatim) {
  for (const std::string model : {"ResNet18", "VGG19"}) {
    const CommandResult run = Run(model, {"--model", model, "--dataset", "MNIST", "--dataset_root", mnist_.path(),
                                          "--dtype", "bf16", "--amp", "--loss-scale", "--num_workers", "2",
                                          "--progress-bar", "--batch_size", "8", "--epochs", "1"},
                                  /*max_steps=*/1);  // bfloat16 on a CPU without it: ~13 s a step
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const nlohmann::json summary = ReadSummary(out_ / model);
    EXPECT_EQ(summary["status"], "ok");
    EXPECT_EQ(summary["model"], model == "VGG19" ? "vgg19" : "resnet18");
    EXPECT_EQ(summary["precision"], "amp-bf16");
    EXPECT_EQ(summary["loss_scale_mode"], "dynamic");
    EXPECT_EQ(summary["num_workers"], 2);
    EXPECT_EQ(summary["steps"], 1);
  }
}

TEST_F(SeedCommandLines, AlexNetAt227PixelsRunsVerbatimAndLogsToTheTensorBoardFolderGiven) {
  TempDir tensorboard;
  const CommandResult run = Run("alexnet", {"--model", "AlexNet", "--img_size", "227", "--dataset", "MNIST",
                                            "--dataset_root", mnist_.path(), "--batch_size", "4", "--tensorboard",
                                            "--tensorboard_log", tensorboard.path()},
                                /*max_steps=*/1);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string config = ReadText(out_ / "alexnet/config.yaml");
  EXPECT_NE(config.find("augment: resize\n"), std::string::npos) << config;
  EXPECT_NE(config.find("resize: 227\n"), std::string::npos) << config;
  EXPECT_EQ(ReadSummary(out_ / "alexnet")["model"], "alexnet");
  EXPECT_TRUE(HasEventFile(out_ / "alexnet")) << "the output folder keeps its own events";
  EXPECT_TRUE(HasEventFile(tensorboard / "alexnet")) << "and the run appears under --tensorboard_log";
}

TEST_F(SeedCommandLines, Cifar10AndItsRootReachTheCifarLoader) {
  TempDir root;
  const CommandResult run = Run("cifar", {"--dataset", "CIFAR10", "--dataset_root", root.path()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find(root / "data_batch_1.bin"), std::string::npos) << run.output;
}

TEST_F(SeedCommandLines, Cifar10RootAsTorchvisionLeavesItTrains) {
  // torchvision's CIFAR10(root, download=True) unpacks the Python release into
  // root/cifar-10-batches-py: pickled dicts of numpy arrays. numpy pickles them here as the
  // release does (protocol 2) and as a newer Python does by default (protocol 5).
  ASSERT_TRUE(std::string(MGPU_TEST_PYTHON) != "" && PathExists(MGPU_TEST_PYTHON))
      << "the test Python (with numpy) is missing: run `make deps`, then build again";
  TempDir root;
  const CommandResult write = RunCommand({MGPU_TEST_PYTHON, "-c", R"(
import os, pickle, sys, numpy as np
folder = os.path.join(sys.argv[1], "cifar-10-batches-py")
os.makedirs(folder)
rng = np.random.default_rng(0)
for name, protocol in [("data_batch_%d" % i, 2) for i in range(1, 6)] + [("test_batch", 5)]:
    labels = rng.integers(0, 10, 10000)
    rows = np.arange(32)[None, None, :, None]                  # a bright band of rows per class
    band = (rows >= 3 * labels[:, None, None, None]) & (rows < 3 * labels[:, None, None, None] + 3)
    pixels = np.where(band, 220, 20).astype(np.uint8).repeat(3, axis=1).repeat(32, axis=3).reshape(10000, 3072)
    with open(os.path.join(folder, name), "wb") as f:
        pickle.dump({b"batch_label": b"batch", b"labels": [int(l) for l in labels], b"data": pixels,
                     b"filenames": [b"img.png"] * 10000}, f, protocol=protocol)
)", root.path()});
  ASSERT_EQ(write.exit_code, 0) << write.output;
  const CommandResult run = Run("python-release", {"--dataset", "CIFAR10", "--dataset_root", root.path(),
                                                   "--batch_size", "64", "--lr", "0.01"}, /*max_steps=*/30);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json summary = ReadSummary(out_ / "python-release");
  EXPECT_EQ(summary["class_names"][0], "airplane");
  EXPECT_GT(summary["test_accuracy"].get<double>(), 50) << "each class is a band of rows: learnt in 30 steps";
}

TEST_F(SeedCommandLines, MnistMethodsRunVerbatim) {
  for (const std::string mode : {"base", "DP"}) {
    const CommandResult run = Run(mode, {"--model", "LeNet", "--dataset", "MNIST", "--dataset_root", mnist_.path(),
                                         "--mode", mode, "--num_workers", "4", "--batch_size", "32"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const nlohmann::json summary = ReadSummary(out_ / mode);
    EXPECT_EQ(summary["mode"], mode == "base" ? "single" : "dp");
    EXPECT_EQ(summary["dataset"], "mnist");
    EXPECT_EQ(summary["num_workers"], 4);
  }
}

TEST_F(SeedCommandLines, CheckpointAndItsNameSaveTheWeightsForTorchLoad) {
  ASSERT_TRUE(std::string(MGPU_TORCH_PYTHON) != "" && PathExists(MGPU_TORCH_PYTHON))
      << "the Python with torch is missing: run `make deps`, then build again";
  TempDir checkpoints;
  const CommandResult named = Run("named", {"--model", "LeNet", "--dataset", "MNIST", "--dataset_root", mnist_.path(),
                                            "--checkpoint", checkpoints.path(), "--checkpoint_name", "lenet_mnist.pth"});
  ASSERT_EQ(named.exit_code, 0) << named.output;
  const std::string file = checkpoints / "lenet_mnist.pth";
  EXPECT_EQ(ReadSummary(out_ / "named")["checkpoint_file"], file);
  EXPECT_EQ(ReadText(file), ReadText(out_ / "named/model_state_dict.pt")) << "the same weights as the export";
  const CommandResult load = RunCommand({MGPU_TORCH_PYTHON, "-c", R"(
import sys, torch
state = torch.load(sys.argv[1], weights_only=True)
print(sorted(state)[:2], tuple(state["conv1.weight"].shape))
)", file});
  ASSERT_EQ(load.exit_code, 0) << load.output;
  EXPECT_NE(load.output.find("(6, 1, 5, 5)"), std::string::npos) << load.output;

  const CommandResult bare = Run("bare", {"--model", "LeNet", "--dataset", "MNIST", "--dataset_root", mnist_.path(),
                                          "--checkpoint"});
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_TRUE(IsRegularFile(out_ / "bare/lenet.pth")) << "a bare --checkpoint writes into the output folder";
  struct stat pth {}, state_dict {};
  ASSERT_EQ(::stat((out_ / "bare/lenet.pth").c_str(), &pth), 0);
  ASSERT_EQ(::stat((out_ / "bare/model_state_dict.pt").c_str(), &state_dict), 0);
  EXPECT_EQ(pth.st_ino, state_dict.st_ino) << "one copy of the weights: the .pth is a second name of the export";
  EXPECT_FALSE(PathExists(out_ / "bare/model.pt")) << "model.pt only with --save-module";

  WriteBytes(checkpoints / "a-file", "not a folder");
  const CommandResult blocked = Run("blocked", {"--dataset", "MNIST", "--dataset_root", mnist_.path(), "--checkpoint",
                                                checkpoints / "a-file/sub"});
  EXPECT_EQ(blocked.exit_code, 2) << blocked.output;
  EXPECT_NE(blocked.output.find("give a folder that can be written"), std::string::npos) << blocked.output;
}

TEST_F(SeedCommandLines, SaveModuleAddsLibTorchsArchiveOfTheModule) {
  const CommandResult run = Run("module", {"--dataset", "MNIST", "--data-dir", mnist_.path(), "--save-module"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto model = MakeModel("lenet", ModelShape{1, 10, 28, 28});
  torch::load(model, out_ / "module/model.pt");
  EXPECT_EQ(model->parameters().size(), SavedLeNetParameters(out_ / "module/model_state_dict.pt").size());
}

TEST_F(SeedCommandLines, TensorboardFalseLeavesTheEventFileOut) {
  const CommandResult run = Run("quiet", {"--dataset", "MNIST", "--data-dir", mnist_.path(), "--tensorboard", "false"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(HasEventFile(out_ / "quiet"));
  EXPECT_TRUE(PathExists(out_ / "quiet/summary.json"));
}

TEST_F(SeedCommandLines, ASpellingThatMeansNothingExitsTwoNamingTheClosest) {
  const CommandResult flag = Run("flag", {"--dataset", "MNIST", "--dataset_root", mnist_.path(), "--img_szie", "64"});
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_NE(flag.output.find("unknown flag --img_szie (did you mean --img-size?)"), std::string::npos) << flag.output;
  const CommandResult value = Run("value", {"--dataset", "CIFAR-1O", "--dataset_root", mnist_.path()});
  EXPECT_EQ(value.exit_code, 2) << value.output;
  EXPECT_NE(value.output.find("did you mean 'cifar10'?"), std::string::npos) << value.output;
  EXPECT_FALSE(PathExists(out_ / "value/summary.json")) << "bad flags stop the worker before it starts a run";
}

}  // namespace
}  // namespace mgpu
