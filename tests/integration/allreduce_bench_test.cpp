// mgpu-allreduce-bench (bench/allreduce_bench.cpp) on the CPU: two Gloo ranks sweep the sizes,
// check every sum and report nccl-tests' bandwidth figures on rank 0.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(AllReduceBench, TwoGlooRanksReportEverySizeFromEightBytesUp) {
  const int port = FreeLocalPort();
  const std::vector<std::string> argv = {MGPU_ALLREDUCE_BENCH_BIN, "--backend", "gloo", "--max-bytes", "1024",
                                         "--iters", "3", "--warmup", "1"};
  BackgroundCommand rank1(argv, TorchrunEnvironment(1, 2, port));
  const CommandResult rank0 = RunCommand(argv, TorchrunEnvironment(0, 2, port));
  const CommandResult other = rank1.Wait();
  ASSERT_EQ(rank0.exit_code, 0) << rank0.output;
  ASSERT_EQ(other.exit_code, 0) << other.output;
  std::istringstream lines(rank0.output);
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(lines, line)) {
    if (line.rfind("{", 0) != 0) continue;
    const auto row = nlohmann::json::parse(line);
    if (row.contains("bytes")) rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 8u) << rank0.output;  // 8, 16, ..., 1024 bytes
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["bytes"].get<int64_t>(), int64_t{8} << i);
    EXPECT_GT(rows[i]["time_us"].get<double>(), 0);
    // Two ranks: the bus factor 2 (n - 1) / n is 1.
    EXPECT_DOUBLE_EQ(rows[i]["busbw_gbps"].get<double>(), rows[i]["algbw_gbps"].get<double>());
  }
  EXPECT_EQ(other.output.find("\"bytes\""), std::string::npos) << "only rank 0 reports";
}

TEST(AllReduceBench, BadSizesAreRefusedBeforeAnyRendezvous) {
  const CommandResult result = RunCommand({MGPU_ALLREDUCE_BENCH_BIN, "--min-bytes", "2"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--min-bytes"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace mgpu
