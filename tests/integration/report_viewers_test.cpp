// Our outputs opened in the programs people open them in: a `--quick` comparison's report.html in
// headless Chromium (the DOM it builds, its console, a screenshot) and a run's event files in
// TensorBoard's own reader. Both programs come from scripts/setup.sh (`make deps`); a machine
// without them fails these tests, saying so, rather than skipping them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "data/image_codec.h"
#include "tests/support/headless_chromium.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

constexpr const char* kChromium = MGPU_CHROMIUM;
constexpr const char* kTestPython = MGPU_TEST_PYTHON;
// `make deps` runs set-up only when scripts/setup.sh changed since the last one; the script itself
// re-checks everything and installs what is missing.
constexpr const char* kRunSetup =
    "run `make deps` (or `bash scripts/setup.sh build/.setup.env` where make says there is nothing to "
    "do), which installs it, then build again";

// The three runs of the comparison and the colours report.html gives them (its palette's first three).
const std::vector<std::string> kRuns = {"sgd", "adam", "adam-2-workers"};
const std::vector<uint32_t> kRunColors = {0x4e79a7, 0xf28e2b, 0xe15759};

// Values of one CSV file's column, by header name (no quoted fields: metrics.csv has none).
std::vector<double> CsvColumn(const std::string& path, const std::string& column) {
  std::vector<std::vector<std::string>> rows;
  const std::string text = ReadText(path);
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> fields(1);
    for (char c : text.substr(begin, end - begin)) {
      if (c == ',') fields.emplace_back();
      else fields.back().push_back(c);
    }
    rows.push_back(fields);
    begin = end + 1;
  }
  const auto at = std::find(rows.at(0).begin(), rows.at(0).end(), column);
  EXPECT_NE(at, rows.at(0).end()) << path << " has no column " << column;
  std::vector<double> values;
  for (size_t r = 1; r < rows.size() && at != rows[0].end(); ++r) {
    values.push_back(std::stod(rows[r].at(static_cast<size_t>(at - rows[0].begin()))));
  }
  return values;
}

std::string EventFileIn(const std::string& folder) {
  for (const std::string& name : ListDirectory(folder)) {
    if (name.rfind("events.out.tfevents.", 0) == 0) return folder + "/" + name;
  }
  return "";
}

// `mgpu compare --quick` of three LeNet runs on a tiny MNIST-like set, run once for the suite.
class QuickComparison : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    WriteTinyMnistLike(*dir_ / "data", 256, 100);
    // 256 images in batches of 32 are 8 steps; --quick stops at 6.
    WriteBytes(*dir_ / "plan.yaml",
               "name: three optimizers\n"
               "description: LeNet on a tiny MNIST-like set, SGD vs Adam\n"
               "base: {model: lenet, data-dir: " + *dir_ / "data" + ", device: cpu, threads: 1, epochs: 1,"
               " batch-size: 32, log-every: 2}\n"
               "quick: {max-steps: 6}\n"
               "runs:\n"
               "  - {name: sgd, optimizer: sgd, lr: 0.1}\n"
               "  - {name: adam, optimizer: adam, lr: 0.001}\n"
               "  - {name: adam-2-workers, optimizer: adam, lr: 0.003, num-workers: 2}\n");
    result_ = new CommandResult(RunCommand({MGPU_LAUNCHER_BIN, "compare", *dir_ / "plan.yaml", "--quick", "--out", out()}));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete dir_;
  }
  static std::string out() { return *dir_ / "out"; }

  static TempDir* dir_;
  static CommandResult* result_;
};

TempDir* QuickComparison::dir_ = nullptr;
CommandResult* QuickComparison::result_ = nullptr;

TEST_F(QuickComparison, WritesEveryFileForEveryRun) {
  ASSERT_EQ(result_->exit_code, 0) << result_->output;
  for (const char* file : {"comparison.csv", "comparison.json", "report.md", "report.html", "compare.yaml"}) {
    EXPECT_TRUE(IsRegularFile(out() + "/" + file)) << file;
  }
  const auto doc = nlohmann::json::parse(ReadText(out() + "/comparison.json"));
  ASSERT_EQ(doc["runs"].size(), kRuns.size());
  for (size_t i = 0; i < kRuns.size(); ++i) {
    const std::string folder = out() + "/" + kRuns[i];
    EXPECT_EQ(doc["runs"][i]["name"], kRuns[i]);
    EXPECT_EQ(doc["runs"][i]["summary"]["status"], "ok");
    EXPECT_EQ(doc["runs"][i]["summary"]["epochs_detail"][0]["steps"], 6) << "--quick applied max-steps: 6";
    for (const char* file : {"summary.json", "metrics.csv", "config.yaml", "logs/rank-0.log"}) {
      EXPECT_TRUE(IsRegularFile(folder + "/" + file)) << folder << "/" << file;
    }
    EXPECT_NE(EventFileIn(folder), "") << "no TensorBoard event file in " << folder;
  }
  EXPECT_EQ(LineCount(out() + "/comparison.csv"), 4) << "a header and three rows";
  const std::string report = ReadText(out() + "/report.md");
  for (const auto& run : kRuns) EXPECT_NE(report.find("| " + run + " |"), std::string::npos) << report;
}

TEST_F(QuickComparison, ReportRendersInHeadlessChromiumWithoutConsoleErrors) {
  ASSERT_EQ(result_->exit_code, 0) << result_->output;
  ASSERT_TRUE(kChromium[0] != '\0' && PathExists(kChromium))
      << "Debian's chromium is missing ('" << kChromium << "'): " << kRunSetup;
  const std::string url = "file://" + out() + "/report.html";

  // The DOM Chromium built from the page: every chart is there as SVG with its curves and bars,
  // and the page logged nothing to the console.
  const BrowserResult dom = RunHeadlessChromium(kChromium, *dir_ / "chromium-dom", {"--enable-logging=stderr", "--v=0", "--dump-dom"}, url);
  ASSERT_FALSE(dom.timed_out) << dom.stderr_text;
  EXPECT_EQ(dom.exit_code, 0) << dom.stderr_text;
  EXPECT_TRUE(dom.left_behind.empty()) << dom.left_behind.size() << " browser processes outlived it";
  EXPECT_EQ(Count(dom.stderr_text, ":CONSOLE"), 0u) << dom.stderr_text;
  const std::string& html = dom.stdout_text;
  EXPECT_EQ(Count(html, "<svg"), 6u) << html;
  EXPECT_EQ(Count(SectionOf(html, "results"), "<tr class=\"ok\">"), 3u);
  EXPECT_EQ(Count(SectionOf(html, "loss"), "<polyline"), 3u) << "a loss curve per run";
  EXPECT_EQ(Count(SectionOf(html, "accuracy"), "<circle"), 3u) << "one epoch, a point per run";
  EXPECT_EQ(Count(SectionOf(html, "throughput"), "class=\"bar\""), 3u);
  EXPECT_EQ(Count(SectionOf(html, "memory"), "class=\"bar\""), 3u);
  EXPECT_EQ(Count(SectionOf(html, "time"), "class=\"bar\""), 9u) << "data wait, compute, communication per run";
  EXPECT_EQ(Count(SectionOf(html, "per-class"), "class=\"bar\""), 30u) << "10 classes x 3 runs";

  // What a person sees: a 1280 x 4000 screenshot, kept in the build folder for looking at, in
  // which each run's colour fills its bars (thousands of pixels, not just a legend swatch).
  const std::string screenshot = *dir_ / "report.png";
  const BrowserResult shot = RunHeadlessChromium(
      kChromium, *dir_ / "chromium-shot", {"--hide-scrollbars", "--window-size=1280,4000", "--screenshot=" + screenshot}, url);
  ASSERT_FALSE(shot.timed_out) << shot.stderr_text;
  EXPECT_EQ(shot.exit_code, 0) << shot.stderr_text;
  EXPECT_TRUE(shot.left_behind.empty()) << shot.left_behind.size() << " browser processes outlived it";
  ASSERT_TRUE(IsRegularFile(screenshot)) << shot.stderr_text;
  MakeDirectories(MGPU_TEST_ARTIFACTS_DIR);
  WriteBytes(std::string(MGPU_TEST_ARTIFACTS_DIR) + "/report-screenshot.png", ReadText(screenshot));
  const DecodedImage image = DecodeImageFile(screenshot);
  ASSERT_EQ(image.width, 1280);
  ASSERT_EQ(image.height, 4000);
  std::map<uint32_t, size_t> pixels_of;
  for (size_t p = 0; p < image.rgb.size(); p += 3) {
    ++pixels_of[(uint32_t{image.rgb[p]} << 16) | (uint32_t{image.rgb[p + 1]} << 8) | image.rgb[p + 2]];
  }
  EXPECT_GT(pixels_of.size(), 50u) << "text, grid lines and bars in many shades, not a blank page";
  for (size_t i = 0; i < kRuns.size(); ++i) {
    EXPECT_GT(pixels_of[kRunColors[i]], 5000u) << kRuns[i] << "'s bars";
  }
}

// TensorBoard's reader, run on `folder` by the test environment's Python; what it read.
nlohmann::json ReadWithTensorBoard(const std::string& folder, const std::string& json_path) {
  const CommandResult read = RunCommand(
      {kTestPython, std::string(MGPU_SOURCE_DIR) + "/tests/integration/read_tensorboard_events.py", folder, json_path});
  EXPECT_EQ(read.exit_code, 0) << read.output;
  return read.exit_code == 0 ? nlohmann::json::parse(ReadText(json_path)) : nlohmann::json();
}

TEST(TensorBoardReader, ReadsEveryScalarAWorkerRunWroteAtItsStep) {
  ASSERT_TRUE(kTestPython[0] != '\0' && PathExists(kTestPython))
      << "the test Python with tensorboard is missing ('" << kTestPython << "'): " << kRunSetup;
  TempDir dir;
  WriteTinyMnistLike(dir / "data", 256, 100);
  // 8 steps logged every 3: steps 3, 6 and the epoch's last, 8. Dynamic loss scaling puts a
  // scale other than 1 into the events.
  const CommandResult run = RunCommand({MGPU_WORKER_BIN, "--model", "lenet", "--data-dir", dir / "data", "--device", "cpu",
                                        "--threads", "1", "--epochs", "1", "--batch-size", "32", "--log-every", "3",
                                        "--loss-scale", "dynamic", "--out", dir / "run"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json read = ReadWithTensorBoard(dir / "run", dir / "read.json");
  ASSERT_TRUE(read.is_object());
  EXPECT_EQ(read["file_version"], 2.0) << "TensorBoard's reading of our first record, \"brain.Event:2\"";

  const std::vector<double> steps = CsvColumn(dir / "run/metrics.csv", "step");
  EXPECT_EQ(steps, (std::vector<double>{3, 6, 8}));
  const std::map<std::string, std::string> per_step = {{"train/loss", "loss"},
                                                       {"train/lr", "lr"},
                                                       {"train/loss_scale", "loss_scale"},
                                                       {"train/images_per_second", "images_per_second"}};
  const nlohmann::json epoch = nlohmann::json::parse(ReadText(dir / "run/summary.json"))["epochs_detail"][0];
  const std::map<std::string, double> per_epoch = {{"train/epoch_loss", epoch["train_loss"].get<double>()},
                                                   {"test/loss", epoch["test_loss"].get<double>()},
                                                   {"test/accuracy", epoch["test_accuracy"].get<double>()}};
  std::set<std::string> expected_tags;
  for (const auto& [tag, column] : per_step) expected_tags.insert(tag);
  for (const auto& [tag, value] : per_epoch) expected_tags.insert(tag);

  // The classic reader and the Scalars dashboard's both see exactly our tags, at the logged steps
  // with the logged values (TensorBoard keeps float32: compared to 1e-6 relative).
  for (const char* reader : {"scalars", "dashboard"}) {
    SCOPED_TRACE(reader);
    std::set<std::string> tags;
    for (const auto& [tag, points] : read[reader].items()) tags.insert(tag);
    EXPECT_EQ(tags, expected_tags);
    for (const auto& [tag, column] : per_step) {
      const std::vector<double> values = CsvColumn(dir / "run/metrics.csv", column);
      const nlohmann::json& points = read[reader][tag];
      ASSERT_EQ(points.size(), steps.size()) << tag;
      for (size_t i = 0; i < steps.size(); ++i) {
        EXPECT_EQ(points[i][0].get<double>(), steps[i]) << tag;
        EXPECT_NEAR(points[i][1].get<double>(), values[i], 1e-6 * std::abs(values[i])) << tag << " at step " << steps[i];
      }
    }
    for (const auto& [tag, value] : per_epoch) {
      const nlohmann::json& points = read[reader][tag];
      ASSERT_EQ(points.size(), 1u) << tag;
      EXPECT_EQ(points[0][0], 8) << tag << " is logged at the epoch's last step";
      EXPECT_NEAR(points[0][1].get<double>(), value, 1e-6 * std::abs(value)) << tag;
    }
  }
  EXPECT_EQ(read["scalars"]["train/loss_scale"][0][1], 65536) << "GradScaler's initial scale, 2^16";
}

}  // namespace
}  // namespace mgpu
