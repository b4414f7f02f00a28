// mgpu-worker with --data-loading stream on generated image data: an ImageFolder and a
// WebDataset of colour-coded classes train above chance, and the summary says how the data was
// loaded and how many samples each split has. Errors of the streaming options exit with 2.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "tests/support/image_files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

constexpr int kClasses = 3;

class StreamLoaderCli : public ::testing::Test {
 protected:
  CommandResult Train(const std::string& name, const std::string& dataset, const std::string& folder,
                      std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--dataset", dataset, "--data-dir", folder,
                                     "--model", "lenet", "--device", "cpu", "--threads", "1",
                                     "--image-size", "24", "--batch-size", "16", "--lr", "0.003",
                                     "--epochs", "4", "--out", out_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }

  nlohmann::json Summary(const std::string& name) { return nlohmann::json::parse(ReadText(out_ / name + "/summary.json")); }

  TempDir data_;
  TempDir out_;
};

TEST_F(StreamLoaderCli, ImageFolderStreamsWithRandomResizedCropsAndLearns) {
  WriteColourImageFolder(data_.path(), ColourSetOptions{kClasses, 32, 10, 30, 80, 11});
  const CommandResult result = Train("folder", "imagefolder", data_.path(),
                                     {"--data-loading", "STREAM", "--augment", "rrc-flip", "--num-workers", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = Summary("folder");
  EXPECT_EQ(summary["data_loading"], "stream");
  EXPECT_EQ(summary["train_samples"], kClasses * 32);
  EXPECT_EQ(summary["test_samples"], kClasses * 10);
  EXPECT_EQ(summary["skipped_images"], 0);
  EXPECT_GT(summary["test_accuracy"].get<double>(), 70.0) << "chance is 33%: " << result.output;
}

TEST_F(StreamLoaderCli, WebDatasetShardsTrainAndAutoPicksMemoryForSmallSets) {
  WriteColourWebDataset(data_.path(), ColourSetOptions{kClasses, 32, 10, 30, 80, 12}, 3);
  CommandResult result = Train("shards", "webdataset", data_.path(), {"--data-loading", "stream", "--num-workers", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  nlohmann::json summary = Summary("shards");
  EXPECT_EQ(summary["data_loading"], "stream");
  EXPECT_EQ(summary["dataset"], "webdataset");
  EXPECT_EQ(summary["train_samples"], kClasses * 32);
  EXPECT_EQ(summary["class_names"], (nlohmann::json{"class0", "class1", "class2"}));
  EXPECT_GT(summary["test_accuracy"].get<double>(), 70.0) << "chance is 33%: " << result.output;

  result = Train("auto", "webdataset", data_.path(), {"--epochs", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  summary = Summary("auto");
  EXPECT_EQ(summary["data_loading"], "memory") << "a few KB decoded fit any memory budget";
  EXPECT_EQ(summary["test_samples"], kClasses * 10);
}

TEST_F(StreamLoaderCli, SkipsUnreadableStreamedImagesAndCountsThem) {
  WriteColourImageFolder(data_.path(), ColourSetOptions{kClasses, 8, 3, 30, 40, 13});
  WriteBytes(data_ / "train/class1/0002.jpg", "\xFF\xD8\xFF broken");
  CommandResult result = Train("fail", "imagefolder", data_.path(), {"--data-loading", "stream", "--epochs", "1"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("train/class1/0002.jpg"), std::string::npos) << result.output;
  result = Train("skip", "imagefolder", data_.path(),
                 {"--data-loading", "stream", "--epochs", "1", "--on-bad-image", "skip"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(Summary("skip")["skipped_images"], 1);
  EXPECT_NE(ReadText(out_ / "skip/logs/rank-0.log").find("skipped unreadable image"), std::string::npos);
}

TEST_F(StreamLoaderCli, MemoryModeCountsTheImagesItSkippedAndNamesAFifo) {
  WriteColourImageFolder(data_.path(), ColourSetOptions{kClasses, 8, 3, 30, 40, 14});
  WriteBytes(data_ / "train/class1/0002.jpg", "\xFF\xD8\xFF broken");
  CommandResult result = Train("memory-skip", "imagefolder", data_.path(),
                               {"--data-loading", "memory", "--epochs", "1", "--on-bad-image", "skip"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(Summary("memory-skip")["skipped_images"], 1);

  ASSERT_EQ(mkfifo((data_ / "train/class0/fifo.jpg").c_str(), 0600), 0);
  result = Train("memory-fifo", "imagefolder", data_.path(), {"--data-loading", "memory", "--epochs", "1"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(data_ / "train/class0/fifo.jpg: a FIFO"), std::string::npos) << result.output;
}

TEST_F(StreamLoaderCli, StreamOnADataSetHeldInMemoryExitsWith2) {
  const CommandResult result = Train("mnist", "synthetic", "", {"--data-loading", "stream"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--data-loading stream"), std::string::npos) << result.output;
  const CommandResult shards = Train("none", "webdataset", data_.path(), {"--data-loading", "stream"});
  EXPECT_EQ(shards.exit_code, 2) << shards.output;
  EXPECT_NE(shards.output.find("--dataset webdataset reads DIR/train/*.tar"), std::string::npos) << shards.output;
}

// --decode (data/decode_mode.h): gpu where it cannot run exits 2 naming why; auto runs on the
// CPU and says so in summary.json and the start-up table.
TEST_F(StreamLoaderCli, DecodeGpuWithoutCudaExitsWith2AndAutoDecodesOnTheCpu) {
  WriteColourImageFolder(data_.path(), ColourSetOptions{kClasses, 4, 2, 30, 40, 15});
  CommandResult result = Train("gpu", "imagefolder", data_.path(),
                               {"--data-loading", "stream", "--epochs", "1", "--decode", "gpu"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--decode gpu: the training device is not a CUDA device"), std::string::npos)
      << result.output;
  result = Train("gpu-memory", "imagefolder", data_.path(), {"--data-loading", "memory", "--decode", "gpu"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--decode gpu decodes streamed JPEGs"), std::string::npos) << result.output;

  result = Train("auto", "imagefolder", data_.path(), {"--data-loading", "stream", "--epochs", "1", "--decode", "auto"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(Summary("auto")["decode"], "cpu");
  const std::string log = ReadText(out_ / "auto/logs/rank-0.log");
  EXPECT_NE(log.find("cpu (--decode auto: the training device is not a CUDA"), std::string::npos) << log;
  EXPECT_EQ(log.find("CUDA work queues"), std::string::npos) << log;  // --device cpu: left as they are
}

}  // namespace
}  // namespace mgpu
