// Specification of the seed experiments' spellings: their command lines parse verbatim into the
// options they mean (choices in any case, switches without a value, Python-style flag names),
// and a spelling that cannot mean anything is a BadInputError suggesting the closest valid one.
#include <gtest/gtest.h>

#include "common/status.h"
#include "config/command_line.h"
#include "tests/support/test_support.h"
#include "worker/train_config.h"

namespace mgpu {
namespace {

using testing::BadInputMessage;
using testing::TempDir;
using testing::WriteBytes;

TrainConfig Parse(const std::vector<std::string>& args) {
  int exit_code = 0;
  std::optional<TrainConfig> config = ParseWorkerCommandLine(args, exit_code);
  if (!config) throw std::logic_error("--help was not asked for");
  return *config;
}

std::string ParseError(const std::vector<std::string>& args) {
  return BadInputMessage([&] { Parse(args); });
}

TEST(SeedSpellings, ChoicesAreAcceptedInAnyCaseWithOrWithoutDashes) {
  const TrainConfig config = Parse({"--dataset", "CIFAR10", "--mode", "DDP", "--optimizer", "SGD", "--momentum",
                                    "0.9", "--precision", "AMP_BF16", "--augment", "Crop-Flip"});
  EXPECT_EQ(config.dataset, "cifar10");
  EXPECT_EQ(config.mode, Mode::kDdp);
  EXPECT_EQ(config.optimizer, "sgd");
  EXPECT_EQ(config.precision, Precision::kAmpBf16);
  EXPECT_EQ(config.augment, "crop-flip");
  EXPECT_EQ(Parse({"--dataset", "FashionMNIST"}).dataset, "fashion-mnist");
  EXPECT_EQ(Parse({"--mode", "base"}).mode, Mode::kSingle);
  EXPECT_EQ(Parse({"--mode", "Baseline"}).mode, Mode::kSingle);
  EXPECT_EQ(Parse({"--mode", "DP"}).mode, Mode::kDp);
  EXPECT_EQ(Parse({"--cuda-graphs", "True"}).cuda_graphs, true);
}

TEST(SeedSpellings, PythonStyleFlagNamesAreAliases) {
  const TrainConfig config = Parse({"--num_workers", "4", "--batch_size", "64", "--dataset_root", "/data/cifar",
                                    "--tensorboard_log", "/tmp/tb"});
  EXPECT_EQ(config.num_workers, 4);
  EXPECT_EQ(config.batch_size, 64);
  EXPECT_EQ(config.data_dir, "/data/cifar");
  EXPECT_EQ(config.tensorboard_log, "/tmp/tb");
}

TEST(SeedSpellings, DtypeAmpAndBareLossScaleMeanAutocastWithDynamicScaling) {
  const TrainConfig bf16 = Parse({"--dtype", "bf16", "--amp", "--loss-scale"});
  EXPECT_EQ(bf16.precision, Precision::kAmpBf16);
  EXPECT_EQ(LossScalingText(bf16.loss_scale), "dynamic");
  const TrainConfig fp16 = Parse({"--loss-scale", "--dtype", "fp16", "--amp"});
  EXPECT_EQ(fp16.precision, Precision::kAmpFp16);
  EXPECT_EQ(LossScalingText(fp16.loss_scale), "dynamic");
  EXPECT_EQ(LossScalingText(Parse({"--loss-scale", "1024"}).loss_scale), "1024");
  EXPECT_EQ(LossScalingText(Parse({"--loss_scale", "none"}).loss_scale), "none");
}

TEST(SeedSpellings, ProgressBarSwitchDrawsTheBarWhereOneCanBeDrawn) {
  EXPECT_EQ(Parse({"--progress-bar"}).progress, "auto") << "a bar on a terminal, plain lines elsewhere";
  EXPECT_EQ(Parse({"--progress_bar"}).progress, "auto");
  EXPECT_EQ(Parse({"--progress", "bar", "--progress-bar"}).progress, "bar");
  EXPECT_EQ(Parse({"--progress", "lines", "--progress-bar"}).progress, "auto");
  EXPECT_EQ(Parse({"--progress-bar", "false"}).progress, "lines");
}

TEST(SeedSpellings, TensorboardSwitchKeepsTheEventFileAndFalseDropsIt) {
  EXPECT_TRUE(Parse({"--tensorboard"}).tensorboard);
  EXPECT_TRUE(Parse({}).tensorboard) << "every run writes its events unless told not to";
  EXPECT_FALSE(Parse({"--tensorboard", "false"}).tensorboard);
}

TEST(SeedSpellings, ImgSizeIsTheSideTheModelSees) {
  const TrainConfig cifar = Parse({"--model", "alexnet", "--dataset", "CIFAR10", "--img_size", "227"});
  EXPECT_EQ(cifar.augment, "resize") << "CIFAR-10's 32 px images are resized, as transforms.Resize(227)";
  EXPECT_EQ(cifar.resize, 227);
  const TrainConfig crops = Parse({"--dataset", "cifar10", "--augment", "rrc-flip", "--img-size", "64"});
  EXPECT_EQ(crops.augment, "rrc-flip");
  EXPECT_EQ(crops.resize, 64) << "random resized crops of that side";
  const TrainConfig folder = Parse({"--dataset", "imagefolder", "--img_size", "150"});
  EXPECT_EQ(folder.image_size, 150) << "an image folder is loaded at that size";
  EXPECT_EQ(folder.augment, "none");

  EXPECT_NE(ParseError({"--dataset", "cifar10", "--augment", "crop-flip", "--img_size", "227"})
                .find("--img-size 227 resizes the images, which --augment crop-flip cannot do"),
            std::string::npos);
  EXPECT_NE(ParseError({"--augment", "resize", "--resize", "224", "--img_size", "227"})
                .find("--img-size 227 conflicts with --resize 224"),
            std::string::npos);
}

TEST(SeedSpellings, CheckpointWritesTheWeightsToTheFolderAndNameGiven) {
  EXPECT_EQ(CheckpointPath(Parse({}), "runs/a"), "") << "no --checkpoint: nothing extra is written";
  const TrainConfig bare = Parse({"--model", "AlexNet", "--checkpoint"});
  EXPECT_EQ(CheckpointPath(bare, "runs/a"), "runs/a/alexnet.pth") << "bare: into the output folder";
  const TrainConfig both = Parse({"--checkpoint", "ckpt/{out}", "--checkpoint_name", "alexnet_cifar10.pth"});
  EXPECT_EQ(CheckpointPath(both, "runs/a"), "ckpt/runs/a/alexnet_cifar10.pth");
  EXPECT_EQ(CheckpointPath(Parse({"--checkpoint_name", "w.pth"}), "runs/a"), "runs/a/w.pth")
      << "a name alone puts the file into the output folder";
  EXPECT_EQ(CheckpointPath(Parse({"--model", "VGG19", "--checkpoint", "/tmp/c"}), "runs/a"), "/tmp/c/vgg19.pth");
  EXPECT_NE(ParseError({"--checkpoint_name", "a/b.pth"}).find("--checkpoint-name: 'a/b.pth' is not a file name"),
            std::string::npos);
}

TEST(SeedSpellings, FoldedSpellingsReadBackFromConfigYamlUnchanged) {
  TempDir dir;
  const TrainConfig config = Parse({"--dataset", "cifar10", "--img_size", "227", "--dtype", "bf16", "--amp",
                                    "--loss-scale", "--progress-bar", "false", "--tensorboard_log", dir.path(),
                                    "--checkpoint_name", "a.pth"});
  WriteBytes(dir / "config.yaml", ConfigToYaml(config));
  const TrainConfig back = Parse({"--config", dir / "config.yaml"});
  EXPECT_EQ(ConfigToYaml(back), ConfigToYaml(config));
}

TEST(SeedSpellings, AMisspeltValueSuggestsTheClosestChoice) {
  const std::string dataset = ParseError({"--dataset", "cifar1O"});
  EXPECT_NE(dataset.find("--dataset: 'cifar1O' is not one of: "), std::string::npos) << dataset;
  EXPECT_NE(dataset.find("did you mean 'cifar10'?"), std::string::npos) << dataset;
  EXPECT_NE(ParseError({"--optimizer", "adamW2"}).find("did you mean 'adamw'?"), std::string::npos);
  const std::string nonsense = ParseError({"--optimizer", "rmsprop"});
  EXPECT_NE(nonsense.find("'rmsprop' is not one of: sgd, adam, adamw"), std::string::npos) << nonsense;
  EXPECT_EQ(nonsense.find("did you mean"), std::string::npos) << "nothing is close: no guess";
  EXPECT_NE(ParseError({"--amp", "maybe"}).find("'maybe' is not true or false"), std::string::npos);
}

TEST(SeedSpellings, AnUnknownFlagSuggestsTheClosestOption) {
  EXPECT_NE(ParseError({"--modle", "lenet"}).find("unknown flag --modle (did you mean --model?)"), std::string::npos);
  EXPECT_NE(ParseError({"--img-szie", "227"}).find("unknown flag --img-szie (did you mean --img-size?)"),
            std::string::npos);
  EXPECT_NE(ParseError({"--numworkers=4"}).find("unknown flag --numworkers (did you mean --num-workers?)"),
            std::string::npos);
  const std::string unknown = ParseError({"--frobnicate"});
  EXPECT_NE(unknown.find("unknown flag --frobnicate; run `mgpu-worker --help`"), std::string::npos) << unknown;
  const std::string stray = ParseError({"--epochs", "2", "lenet"});
  EXPECT_NE(stray.find("unexpected argument 'lenet'"), std::string::npos) << stray;
}

}  // namespace
}  // namespace mgpu
