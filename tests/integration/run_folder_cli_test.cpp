// Run folders are safe to rerun into and their config.yaml is reusable: a fresh run refuses a
// folder that holds a run unless --resume or --overwrite says what to do with it, and config.yaml
// holds the canonical options only, so an edited copy passed back with --config runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

class RunFolderCli : public ::testing::Test {
 protected:
  void SetUp() override { WriteTinyMnistLike(data_.path(), 320, 100); }

  CommandResult Train(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--data-dir", data_.path(), "--device", "cpu", "--threads", "1",
                                     "--batch-size", "32", "--max-steps", "3", "--out", out};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }

  TempDir data_;
  TempDir out_;
};

TEST_F(RunFolderCli, AFreshRunIntoAFinishedRunsFolderIsRefusedAndLeavesItAsItWas) {
  ASSERT_EQ(Train(out_ / "run", {"--seed", "1"}).exit_code, 0);
  const std::string summary = ReadText(out_ / "run/summary.json");
  const CommandResult again = Train(out_ / "run", {"--seed", "2"});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already holds a run"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--resume " + (out_ / "run")), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--overwrite"), std::string::npos) << again.output;
  EXPECT_EQ(ReadText(out_ / "run/summary.json"), summary) << "the refused run must not touch the folder";
}

TEST_F(RunFolderCli, OverwriteReplacesTheRunAndItsCheckpoints) {
  ASSERT_EQ(Train(out_ / "run", {"--seed", "1", "--checkpoint-every", "1"}).exit_code, 0);
  ASSERT_TRUE(PathExists(out_ / "run/checkpoints/latest.ckpt"));
  const CommandResult again = Train(out_ / "run", {"--seed", "2", "--overwrite"});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(nlohmann::json::parse(ReadText(out_ / "run/summary.json"))["seed"], 2);
  EXPECT_FALSE(PathExists(out_ / "run/checkpoints/latest.ckpt")) << "the old run's checkpoint must not be resumable";
}

TEST_F(RunFolderCli, ASavedConfigHoldsCanonicalKeysOnlyAndRunsAgainOnceEdited) {
  ASSERT_EQ(Train(out_ / "first", {"--dtype", "fp32", "--img-size", "0", "--progress-bar", "false"}).exit_code, 0);
  std::string yaml = ReadText(out_ / "first/config.yaml");
  for (const char* key : {"\nout:", "\nresume:", "\noverwrite:", "\ndtype:", "\namp:", "\nimg-size:",
                          "\nprogress-bar:", "\nrank:", "\nworld-size:", "\nmaster-port:", "\ntest-"}) {
    EXPECT_EQ(yaml.find(key), std::string::npos) << key << " in\n" << yaml;
  }
  const size_t precision = yaml.find("precision: fp32");
  ASSERT_NE(precision, std::string::npos) << yaml;
  yaml.replace(precision, std::string("precision: fp32").size(), "precision: amp-bf16");
  WriteBytes(out_ / "edited.yaml", yaml);
  const CommandResult edited = RunCommand({MGPU_WORKER_BIN, "--config", out_ / "edited.yaml", "--out", out_ / "second"});
  ASSERT_EQ(edited.exit_code, 0) << edited.output;
  EXPECT_EQ(nlohmann::json::parse(ReadText(out_ / "second/summary.json"))["precision"], "amp-bf16");
}

}  // namespace
}  // namespace mgpu
