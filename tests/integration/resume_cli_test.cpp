// Schedules, checkpoints and --resume end to end: a run stopped and resumed ends exactly where
// the uninterrupted run ends (CPU, fixed seed), and damaged or mismatched checkpoints are exit 2
// with a message saying why.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "worker/checkpoint_file.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

nlohmann::json ReadSummary(const std::string& folder) {
  return nlohmann::json::parse(ReadText(folder + "/summary.json"));
}

// metrics.csv as step → (loss, lr) text fields, compared exactly.
std::map<int64_t, std::pair<std::string, std::string>> LossAndLrByStep(const std::string& folder) {
  std::map<int64_t, std::pair<std::string, std::string>> rows;
  std::istringstream csv(ReadText(folder + "/metrics.csv"));
  std::string line;
  std::getline(csv, line);  // step,epoch,loss,lr,...
  while (std::getline(csv, line)) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    rows[std::stoll(fields[0])] = {fields[2], fields[3]};
  }
  return rows;
}

class ResumeCli : public ::testing::Test {
 protected:
  // 640 training images in batches of 32: 20 steps per epoch.
  static void SetUpTestSuite() {
    data_ = new TempDir();
    WriteTinyMnistLike(data_->path(), 640, 200);
  }
  static void TearDownTestSuite() { delete data_; }

  CommandResult Train(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", data_->path(), "--device", "cpu", "--threads", "1",
                                     "--batch-size", "32", "--epochs", "2", "--seed", "3", "--log-every", "4",
                                     "--out", out_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }

  // Trains `recipe` uninterrupted and in two parts (stopped by `stop`, resumed from `resume`,
  // a path relative to the output root, with 2 loader threads), and expects the same result.
  void ExpectResumeMatches(const std::vector<std::string>& recipe, const std::vector<std::string>& stop,
                           const std::string& resume, int64_t resumed_after_step) {
    ASSERT_EQ(Train("whole", recipe).exit_code, 0);
    std::vector<std::string> first = recipe;
    first.insert(first.end(), stop.begin(), stop.end());
    CommandResult stopped = Train("first", first);
    ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
    std::vector<std::string> second = recipe;
    second.insert(second.end(), {"--resume", out_ / resume, "--num-workers", "2"});
    CommandResult resumed = Train("second", second);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;

    const nlohmann::json whole = ReadSummary(out_ / "whole");
    const nlohmann::json continued = ReadSummary(out_ / "second");
    EXPECT_EQ(continued["param_checksum"].get<double>(), whole["param_checksum"].get<double>());
    EXPECT_EQ(continued["test_loss"].get<double>(), whole["test_loss"].get<double>());
    EXPECT_EQ(continued["test_accuracy"], whole["test_accuracy"]);
    EXPECT_EQ(continued["per_class_accuracy"], whole["per_class_accuracy"]);
    EXPECT_EQ(continued["steps"], whole["steps"]);
    EXPECT_EQ(continued["final_lr"], whole["final_lr"]);
    ASSERT_EQ(continued["epochs_detail"].size(), whole["epochs_detail"].size())
        << "the epochs before the checkpoint are carried over";
    for (size_t e = 0; e < whole["epochs_detail"].size(); ++e) {
      EXPECT_EQ(continued["epochs_detail"][e]["train_loss"], whole["epochs_detail"][e]["train_loss"]) << e;
      EXPECT_EQ(continued["epochs_detail"][e]["test_loss"], whole["epochs_detail"][e]["test_loss"]) << e;
    }
    const auto whole_rows = LossAndLrByStep(out_ / "whole");
    const auto continued_rows = LossAndLrByStep(out_ / "second");
    ASSERT_FALSE(continued_rows.empty());
    EXPECT_GT(continued_rows.begin()->first, resumed_after_step);
    for (const auto& [step, loss_and_lr] : continued_rows) {
      ASSERT_TRUE(whole_rows.count(step)) << step;
      EXPECT_EQ(loss_and_lr, whole_rows.at(step)) << "loss and lr at step " << step;
    }
  }

  static TempDir* data_;
  TempDir out_;
};

TempDir* ResumeCli::data_ = nullptr;

TEST_F(ResumeCli, MidEpochResumeWithAdamCosineAndLabelSmoothingEqualsTheUninterruptedRun) {
  ExpectResumeMatches({"--optimizer", "adam", "--lr", "0.002", "--scheduler", "cosine", "--warmup-epochs", "0.5",
                       "--min-lr", "0.0001", "--label-smoothing", "0.1", "--augment", "affine"},
                      {"--max-steps", "13", "--checkpoint-every", "5"}, "first", 13);
  // Written at steps 5 and 10, and where --max-steps stopped the run.
  EXPECT_EQ(ListDirectory(out_ / "first/checkpoints"),
            (std::vector<std::string>{"latest.ckpt", "step-10.ckpt", "step-13.ckpt", "step-5.ckpt"}))
      << "no temporary file is left behind";
  EXPECT_EQ(ReadText(out_ / "first/checkpoints/latest.ckpt"), ReadText(out_ / "first/checkpoints/step-13.ckpt"));
}

TEST_F(ResumeCli, EpochBoundaryResumeWithSgdMomentumAndMultistepEqualsTheUninterruptedRun) {
  ExpectResumeMatches({"--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--nesterov", "--scheduler",
                       "multistep", "--milestones", "1", "--gamma", "0.5"},
                      {"--max-steps", "25", "--checkpoint-every", "7"}, "first/checkpoints/step-20.ckpt", 20);
  const auto rows = LossAndLrByStep(out_ / "whole");
  EXPECT_EQ(rows.at(20).second, "0.05") << "epoch 1 trains at --lr";
  EXPECT_EQ(rows.at(24).second, "0.025") << "epoch 2, after milestone 1, at --lr x --gamma";
}

TEST_F(ResumeCli, PlateauScheduleResumesItsCounters) {
  ExpectResumeMatches({"--optimizer", "adam", "--lr", "0.01", "--scheduler", "plateau", "--plateau-patience", "0",
                       "--plateau-factor", "0.5", "--epochs", "3"},
                      {"--max-steps", "30", "--checkpoint-every", "30"}, "first", 30);
}

TEST_F(ResumeCli, LinearScaleRuleIsTheEffectiveLr) {
  ASSERT_EQ(Train("scaled", {"--lr", "0.1", "--lr-scale-rule", "linear", "--max-steps", "4"}).exit_code, 0);
  const nlohmann::json summary = ReadSummary(out_ / "scaled");
  EXPECT_EQ(summary["lr"], 0.1) << "the contract's lr stays the flag's value";
  EXPECT_EQ(summary["effective_lr"], 0.1 * 32 / 256);
  EXPECT_EQ(LossAndLrByStep(out_ / "scaled").at(4).second, "0.0125");
  EXPECT_NE(ReadText(out_ / "scaled/logs/rank-0.log").find("effective lr"), std::string::npos);
}

// The resumed epoch's time starts at the checkpoint, so its images/s counts the images trained
// since (7 steps of 32), not the epoch's 640: that read 2.9x too fast.
TEST_F(ResumeCli, AResumedEpochsImagesPerSecondCountsOnlyTheStepsItRan) {
  ASSERT_EQ(Train("first", {"--max-steps", "13", "--checkpoint-every", "13"}).exit_code, 0);
  const CommandResult resumed = Train("second", {"--resume", out_ / "first"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const nlohmann::json epoch = ReadSummary(out_ / "second")["epochs_detail"].at(0);
  EXPECT_EQ(epoch["steps"], 20);
  const double images = epoch["images_per_second"].get<double>() * epoch["seconds"].get<double>();
  EXPECT_NEAR(images, (20 - 13) * 32, 1e-6 * 640);
}

class BadCheckpoint : public ResumeCli {
 protected:
  void SetUp() override {
    CommandResult result = Train("source", {"--max-steps", "3", "--checkpoint-every", "3"});
    ASSERT_EQ(result.exit_code, 0) << result.output;
    checkpoint_ = ReadText(out_ / "source/checkpoints/step-3.ckpt");
  }
  // Resumes from `bytes` written to a file; expects exit 2 and returns the output.
  std::string ResumeFrom(const std::string& bytes, std::vector<std::string> extra = {}) {
    WriteBytes(out_ / "bad.ckpt", bytes);
    extra.insert(extra.end(), {"--resume", out_ / "bad.ckpt"});
    CommandResult result = Train("resumed", extra);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_EQ(ReadSummary(out_ / "resumed")["status"], "failed");
    return result.output;
  }
  std::string checkpoint_;
};

TEST_F(BadCheckpoint, PythonsTorchLoadReadsItWithWeightsOnly) {
  ASSERT_TRUE(std::string(MGPU_TORCH_PYTHON) != "" && PathExists(MGPU_TORCH_PYTHON))
      << "the Python with torch is missing: run `make deps`, then build again";
  const CommandResult load = RunCommand({MGPU_TORCH_PYTHON, "-c", R"(
import json, sys, torch
ckpt = torch.load(sys.argv[1], weights_only=True)
header = json.loads(ckpt["header"])
print(ckpt["format"], ckpt["format_version"], header["position"]["step"], header["identity"]["model"],
      tuple(ckpt["parameters"]["conv1.weight"].shape), len(ckpt["optimizer"]), type(ckpt["crc32c"]).__name__)
)", out_ / "source/checkpoints/step-3.ckpt"});
  ASSERT_EQ(load.exit_code, 0) << load.output;
  EXPECT_NE(load.output.find("mgpu-checkpoint 2 3 lenet (6, 1, 5, 5)"), std::string::npos) << load.output;
  EXPECT_NE(load.output.find(" int"), std::string::npos) << load.output;
}

TEST_F(BadCheckpoint, TruncatedIsExit2SayingSo) {
  const std::string output = ResumeFrom(checkpoint_.substr(0, checkpoint_.size() / 2));
  EXPECT_NE(output.find(out_ / "bad.ckpt"), std::string::npos) << output;
  EXPECT_NE(output.find("truncated"), std::string::npos) << output;
}

TEST_F(BadCheckpoint, AFlippedByteIsExit2NamingTheChecksum) {
  // A byte inside the archive's first tensor record (stored, not compressed): it still reads.
  std::string flipped = checkpoint_;
  const size_t record = flipped.find("archive/data/0");
  ASSERT_NE(record, std::string::npos);
  flipped[record + 200] ^= 0x01;
  const std::string output = ResumeFrom(flipped);
  EXPECT_NE(output.find("CRC-32C"), std::string::npos) << output;
}

TEST_F(BadCheckpoint, AnotherModelIsExit2NamingTheField) {
  const std::string output = ResumeFrom(checkpoint_, {"--model", "resnet18"});
  EXPECT_NE(output.find("--model \"lenet\""), std::string::npos) << output;
  EXPECT_NE(output.find("--model \"resnet18\""), std::string::npos) << output;
}

TEST_F(BadCheckpoint, AnotherBatchSizeIsExit2NamingTheField) {
  const std::string output = ResumeFrom(checkpoint_, {"--batch-size", "16"});
  EXPECT_NE(output.find("--batch-size 32"), std::string::npos) << output;
}

TEST_F(BadCheckpoint, ANegativeEpochWithItsChecksumRecomputedIsExit2NamingTheFileAndField) {
  const std::string path = out_ / "source/checkpoints/step-3.ckpt";
  CheckpointFileContents contents = DecodeCheckpointFile(checkpoint_, path);
  nlohmann::json header = nlohmann::json::parse(contents.header);
  header["position"]["epoch"] = -123456788;
  const std::string output = ResumeFrom(EncodeCheckpointFile(header.dump(), contents.state));
  EXPECT_NE(output.find(out_ / "bad.ckpt"), std::string::npos) << output;
  EXPECT_NE(output.find("position field 'epoch' is -123456788"), std::string::npos) << output;
}

TEST_F(BadCheckpoint, AMissingFileIsExit2) {
  CommandResult result = Train("resumed", {"--resume", out_ / "nowhere.ckpt"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("no such checkpoint file or run folder"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace mgpu
