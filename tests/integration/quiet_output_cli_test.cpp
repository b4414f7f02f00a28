// What mgpu-worker prints: a --help by sections with types and defaults, a start-up table of what
// matters, and no lines about communication or loss scaling where there is none.
#include <gtest/gtest.h>

#include <regex>

#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(QuietOutputCli, HelpListsOptionsBySectionWithTheirTypesAndDefaults) {
  const CommandResult help = RunCommand({MGPU_WORKER_BIN, "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.output;
  for (const char* section : {"Data and model:", "Training:", "Precision:", "DDP (--mode ddp):", "Output:"}) {
    EXPECT_NE(help.output.find(section), std::string::npos) << section << "\n" << help.output;
  }
  EXPECT_TRUE(std::regex_search(help.output, std::regex(R"(--batch-size,--batch_size INT\s)"))) << help.output;
  EXPECT_TRUE(std::regex_search(help.output, std::regex(R"(--lr NUMBER\s)"))) << help.output;
  EXPECT_TRUE(std::regex_search(help.output, std::regex(R"(--precision CHOICE\s)"))) << help.output;
  EXPECT_NE(help.output.find("[32]"), std::string::npos) << "defaults are shown: " << help.output;
  for (const char* test_only : {"test only", "--test-"}) {
    EXPECT_EQ(help.output.find(test_only), std::string::npos) << "no test-only options: " << help.output;
  }
}

TEST(QuietOutputCli, TheStartupTableShowsChangedOptionsAndResolvedRowsAndNothingMeaningless) {
  TempDir data;
  TempDir out;
  WriteTinyMnistLike(data.path(), 320, 100);
  const CommandResult run = RunCommand({MGPU_WORKER_BIN, "--data-dir", data.path(), "--device", "cpu", "--threads", "1",
                                        "--max-steps", "3", "--lr", "0.02", "--out", out / "run"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\] lr +\| 0\.02\n)"))) << "a changed option: " << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\] device +\| cpu\n)"))) << "a resolved row: " << run.output;
  for (const char* unchanged : {"] nesterov ", "] bucket-cap-mb ", "] dp-impl ", "] master-port "}) {
    EXPECT_EQ(run.output.find(unchanged), std::string::npos) << unchanged << " is at its default: " << run.output;
  }
  EXPECT_EQ(run.output.find("for all-reduces"), std::string::npos) << "one process all-reduces nothing: " << run.output;
  EXPECT_EQ(run.output.find("final loss scale"), std::string::npos) << "no loss scaling: " << run.output;
}

}  // namespace
}  // namespace mgpu
