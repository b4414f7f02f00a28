// mgpu compare / mgpu demo end to end.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"
#include "tests/support/worker_logs.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(MgpuCompare, RunsEveryRowReportsFailuresAndKeepsGoing) {
  TempDir dir;
  WriteTinyMnistLike(dir / "data", 256, 100);
  WriteBytes(dir / "plan.yaml",
             "name: tiny\n"
             "base: {data-dir: " + dir / "data" + ", device: cpu, threads: 1, batch-size: 32, max-steps: 4}\n"
             "matrix:\n  num-workers: [0, 2]\n"
             "runs:\n  - {name: good}\n  - {name: broken, data-dir: " + dir / "nowhere" + "}\n");
  CommandResult result = RunCommand({MGPU_LAUNCHER_BIN, "compare", dir / "plan.yaml", "--out", dir / "out"});
  EXPECT_EQ(result.exit_code, 1) << "one run fails: " << result.output;
  for (const char* file : {"comparison.csv", "comparison.json", "report.md", "report.html", "compare.yaml"}) {
    EXPECT_TRUE(PathExists(dir / (std::string("out/") + file))) << file;
  }
  const auto doc = nlohmann::json::parse(ReadText(dir / "out/comparison.json"));
  ASSERT_EQ(doc["runs"].size(), 4u);
  EXPECT_EQ(doc["runs"][0]["name"], "good/num-workers=0");
  EXPECT_EQ(doc["runs"][1]["summary"]["num_workers"], 2);
  EXPECT_EQ(doc["runs"][1]["summary"]["status"], "ok");
  EXPECT_EQ(doc["runs"][2]["summary"]["status"], "failed");
  EXPECT_EQ(doc["runs"][3]["exit_code"], 2);
  const std::string report = ReadText(dir / "out/report.md");
  EXPECT_NE(report.find("| broken/num-workers=2 |"), std::string::npos) << report;
  EXPECT_NE(report.find("failed (exit 2)"), std::string::npos) << report;
  EXPECT_NE(report.find("\nError: bad input: data folder " + dir / "nowhere"), std::string::npos)
      << "the error, under the run: " << report;
  // comparison.csv: the same status, and the error in its own column.
  const std::string csv = ReadText(dir / "out/comparison.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_EQ(header.substr(header.rfind(",folder")), ",folder,error") << csv;
  const size_t broken_row = csv.find("\nbroken/num-workers=0,");
  ASSERT_NE(broken_row, std::string::npos) << csv;
  const std::string broken = csv.substr(broken_row + 1, csv.find('\n', broken_row + 1) - broken_row - 1);
  EXPECT_NE(broken.find(",failed (exit 2),"), std::string::npos) << broken;
  EXPECT_NE(broken.find(dir / "nowhere"), std::string::npos) << "the error names the missing folder: " << broken;
  const size_t good_row = csv.find("\ngood/num-workers=0,");
  ASSERT_NE(good_row, std::string::npos) << csv;
  EXPECT_NE(csv.find(",ok,", good_row), std::string::npos) << csv;
  EXPECT_EQ(csv[csv.find('\n', good_row + 1) - 1], ',') << "no error for a run that succeeded: " << csv;
  EXPECT_NE(result.output.find("2 of 4 runs failed"), std::string::npos) << result.output;
  const std::string html = ReadText(dir / "out/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"failed\"><td>"), std::string::npos) << "the broken runs";
  EXPECT_NE(result.output.find(dir / "out/report.html"), std::string::npos) << "the final line names it";
}

TEST(MgpuCompare, BadPlanIsExitTwoBeforeAnyRun) {
  TempDir dir;
  WriteBytes(dir / "plan.yaml", "base: {epochs: 1, bogus-option: 3}\nruns: [{name: a}]\n");
  CommandResult result = RunCommand({MGPU_LAUNCHER_BIN, "compare", dir / "plan.yaml", "--out", dir / "out"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("plan.yaml:1: unknown option 'bogus-option'"), std::string::npos) << result.output;
  EXPECT_FALSE(PathExists(dir / "out"));
}

TEST(MgpuCompare, RepeatRunsEveryRowNTimesAndReportsTheMedianAndSpread) {
  TempDir dir;
  WriteTinyMnistLike(dir / "data", 256, 100);
  WriteBytes(dir / "plan.yaml",
             "name: repeated\ndescription: two epochs each\n"
             "base: {data-dir: " + dir / "data" + ", device: cpu, threads: 1, batch-size: 32, epochs: 2}\n"
             "quick: {max-steps: 3}\n"
             "runs: [{name: w0, num-workers: 0}, {name: w2, num-workers: 2}]\n");
  CommandResult result = RunCommand({MGPU_LAUNCHER_BIN, "compare", dir / "plan.yaml", "--quick", "--repeat", "3",
                                     "--out", dir / "out"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto doc = nlohmann::json::parse(ReadText(dir / "out/comparison.json"));
  ASSERT_EQ(doc["runs"].size(), 2u);
  for (const auto& run : doc["runs"]) {
    ASSERT_EQ(run["repeats"].size(), 3u) << run;
    for (int k = 1; k <= 3; ++k) {
      EXPECT_TRUE(PathExists(dir / ("out/" + run["name"].get<std::string>() + "/repeat-" + std::to_string(k) +
                                    "/summary.json"))) << run["name"] << " repeat " << k;
    }
    const auto& rate = run["images_per_second"];
    EXPECT_LE(rate["min"].get<double>(), rate["median"].get<double>()) << run;
    EXPECT_LE(rate["median"].get<double>(), rate["max"].get<double>()) << run;
    EXPECT_TRUE(rate["outlier_repeats"].is_array()) << run;
  }
  EXPECT_NE(result.output.find("img/s spread %"), std::string::npos) << result.output;
  // Repeats go round the plan: w0, w2, w0, w2, ...
  EXPECT_LT(result.output.find("run 2/6: w2 (repeat 1/3)"), result.output.find("run 3/6: w0 (repeat 2/3)"))
      << result.output;
  const std::string report = ReadText(dir / "out/report.md");
  EXPECT_NE(report.find("two epochs each\n\nQuick run (--quick): max-steps=3 on every run"), std::string::npos)
      << "the description is not taken for what ran: " << report;
}

TEST(MgpuCompare, RepeatMustBeAtLeastOne) {
  TempDir dir;
  WriteBytes(dir / "plan.yaml", "base: {epochs: 1}\nruns: [{name: a}]\n");
  CommandResult result =
      RunCommand({MGPU_LAUNCHER_BIN, "compare", dir / "plan.yaml", "--repeat", "0", "--out", dir / "out"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--repeat"), std::string::npos) << result.output;
  EXPECT_FALSE(PathExists(dir / "out"));
}

// Signalled alone (kill PID, as a script or scheduler does), `mgpu compare` passes the signal on to
// the running row, which stops at a step boundary with its checkpoint. No later row starts, the
// report keeps the row as interrupted, and compare exits 128 + 15 only once the row has ended: no
// worker trains on as an orphan.
TEST(MgpuCompare, SigtermStopsTheRunningRowWithItsCheckpointAndStartsNoOther) {
  TempDir dir;
  WriteTinyMnistLike(dir / "data", 640, 100);
  WriteBytes(dir / "plan.yaml",
             "name: endless\n"
             "base: {data-dir: " + dir / "data" + ", device: cpu, threads: 1, batch-size: 32, epochs: 100000, "
             "log-every: 1}\n"
             "runs: [{name: first}, {name: second}]\n");
  BackgroundCommand compare({MGPU_LAUNCHER_BIN, "compare", dir / "plan.yaml", "--out", dir / "out"});
  const std::string first = dir / "out/first";
  pid_t worker = -1;
  const bool training = WaitFor(
      [&] {
        worker = LoggedPid(first + "/logs/rank-0.log");
        return worker > 0 && LineCount(first + "/metrics.csv") > 4;
      },
      120);
  ASSERT_TRUE(training) << compare.WaitAtMost(0).output;
  const std::string stat = ReadText("/proc/" + std::to_string(worker) + "/stat");  // field 4: mgpu compare
  pid_t launcher = -1;
  char state = 0;
  ASSERT_EQ(std::sscanf(stat.c_str() + stat.rfind(')') + 1, " %c %d", &state, &launcher), 2);
  ::kill(launcher, SIGTERM);
  const CommandResult result = compare.WaitAtMost(120);
  const bool worker_ended = ::kill(worker, 0) != 0;
  if (!worker_ended) ::kill(worker, SIGKILL);
  EXPECT_TRUE(worker_ended) << "the row's worker outlived mgpu compare";
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.output;
  EXPECT_NE(result.output.find("stopped by SIGTERM after 1 of 2 runs"), std::string::npos) << result.output;
  ASSERT_TRUE(PathExists(first + "/summary.json")) << "written before compare ended: " << result.output;
  const auto summary = nlohmann::json::parse(ReadText(first + "/summary.json"));
  EXPECT_EQ(summary["status"], "interrupted");
  EXPECT_EQ(summary["interrupted"]["signal"], "SIGTERM");
  EXPECT_TRUE(PathExists(summary["interrupted"]["checkpoint"].get<std::string>())) << summary;
  EXPECT_FALSE(PathExists(dir / "out/second")) << "a row started after the signal";
  const auto doc = nlohmann::json::parse(ReadText(dir / "out/comparison.json"));
  ASSERT_EQ(doc["runs"].size(), 1u);
  EXPECT_EQ(doc["runs"][0]["exit_code"], 128 + SIGTERM);
  const std::string report = ReadText(dir / "out/report.md");
  EXPECT_NE(report.find("interrupted (exit 143)"), std::string::npos) << report;
}

TEST(MgpuDemo, QuickDemoComparesItsRunsOnFashionMnist) {
  TempDir dir;
  CommandResult result = RunCommand({MGPU_LAUNCHER_BIN, "demo", "--quick", "--out", dir / "demo"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto doc = nlohmann::json::parse(ReadText(dir / "demo/comparison.json"));
  ASSERT_EQ(doc["runs"].size(), 4u);
  for (const auto& run : doc["runs"]) EXPECT_EQ(run["summary"]["status"], "ok") << run["name"];
  // The MNIST experiment's three methods: one device, DataParallel, DDP (through `mgpu run`).
  EXPECT_EQ(doc["runs"][0]["summary"]["mode"], "single");
  EXPECT_EQ(doc["runs"][2]["summary"]["mode"], "dp");
  EXPECT_EQ(doc["runs"][2]["summary"]["devices"].size(), 2u);
  EXPECT_EQ(doc["runs"][3]["summary"]["mode"], "ddp");
  EXPECT_EQ(doc["runs"][3]["summary"]["world_size"], 2);
  EXPECT_EQ(doc["runs"][3]["summary"]["launcher"]["nproc_per_node"], 2) << "auto: 2 processes without a GPU";
  EXPECT_NE(result.output.find("accuracy %"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace mgpu
