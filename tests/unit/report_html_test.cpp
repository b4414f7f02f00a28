// Specification of report.html: one self-contained page with the results table and SVG charts,
// in which runs without data are reported as failed and left out of the charts, never breaking them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "launcher/compare/report_html.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using testing::TempDir;
using testing::WriteBytes;
using testing::Count;
using testing::SectionOf;

// The number of points of each polyline, in order.
std::vector<size_t> PolylinePointCounts(const std::string& svg) {
  std::vector<size_t> counts;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    const size_t begin = svg.find("points=\"", at) + 8;
    const std::string points = svg.substr(begin, svg.find('"', begin) - begin);
    counts.push_back(points.empty() ? 0 : Count(points, " ") + 1);
  }
  return counts;
}

// The labels under the x axis of a line chart (the y axis's are right-aligned), in order.
std::vector<std::string> XTickLabels(const std::string& svg) {
  const std::string marker = "class=\"tick\"";
  std::vector<std::string> labels;
  for (size_t at = svg.find(marker); at != std::string::npos; at = svg.find(marker, at + 1)) {
    const size_t close = svg.find('>', at);
    if (svg.substr(at, close - at).find("text-anchor=\"middle\"") == std::string::npos) continue;
    labels.push_back(svg.substr(close + 1, svg.find('<', close) - close - 1));
  }
  return labels;
}

void WriteMetrics(const std::string& folder, const std::vector<double>& losses) {
  std::string csv = "step,epoch,loss,lr\n";
  for (size_t i = 0; i < losses.size(); ++i) csv += std::to_string(i * 10) + ",0," + std::to_string(losses[i]) + ",0.1\n";
  WriteBytes(folder + "/metrics.csv", csv);
}

nlohmann::json OkSummary(double images_per_second_epoch1, double images_per_second_epoch2, double peak_mib) {
  return {{"status", "ok"}, {"mode", "ddp"}, {"precision", "fp32"}, {"num_workers", 2}, {"batch_size", 64},
          {"test_accuracy", 91.5}, {"total_seconds", 12.3},
          {"peak_memory_bytes", {peak_mib * 1048576 / 2, peak_mib * 1048576}},
          {"per_class_accuracy", {90.0, 93.0}}, {"class_names", nlohmann::json::array({"cat", "dog"})},
          {"epochs_detail",
           nlohmann::json::array({{{"epoch", 0}, {"test_accuracy", 80.0}, {"images_per_second", images_per_second_epoch1},
             {"data_wait_seconds", 1.0}, {"compute_seconds", 4.0}, {"comm_seconds", 0.5}},
            {{"epoch", 1}, {"test_accuracy", 91.5}, {"images_per_second", images_per_second_epoch2},
             {"data_wait_seconds", 1.0}, {"compute_seconds", 4.0}, {"comm_seconds", 0.5}}})}};
}

// Five runs: two complete ones with loss curves (one with HTML specials in its name), one
// complete run without metrics.csv, one that failed with an error, one that crashed with no summary.
class ReportHtmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* folder : {"a", "b", "c", "d"}) MakeDirectories(dir_ / folder);
    WriteMetrics(dir_ / "a", {2.3, 1.9, 1.2, 0.8, 0.5});
    WriteMetrics(dir_ / "b", {2.2, 1.0, 0.4});
    WriteMetrics(dir_ / "d", {});  // a failed run's header-only metrics.csv
    rows_ = {{"base<&>\"line'", dir_ / "a", 0, OkSummary(100, 300, 5)},
             {"fast", dir_ / "b", 0, OkSummary(400, 600, 3)},
             {"no-metrics", dir_ / "c", 0, OkSummary(50, 50, 1)},
             {"broken", dir_ / "d", 2,
              {{"status", "failed"}, {"error", "data folder 'x' is missing"}, {"epochs_detail", nlohmann::json::array()}}},
             {"crashed", dir_ / "e", 134, nullptr}};
    plan_.name = "study <1>";
    plan_.description = "compares & contrasts";
    html_ = ReportHtml(plan_, rows_);
  }

  TempDir dir_;
  ComparePlan plan_;
  std::vector<ComparisonRow> rows_;
  std::string html_;
};

TEST_F(ReportHtmlTest, IsOneSelfContainedDocument) {
  EXPECT_EQ(html_.rfind("<!DOCTYPE html>\n", 0), 0u);
  EXPECT_EQ(html_.substr(html_.size() - 8), "</html>\n");
  EXPECT_EQ(Count(html_, "<svg"), 6u) << "loss, accuracy, throughput, memory, time, per-class";
  EXPECT_EQ(Count(html_, "</svg>"), Count(html_, "<svg"));
  EXPECT_EQ(Count(html_, "http"), Count(html_, "xmlns=\"http://www.w3.org/2000/svg\"")) << "no external references";
  EXPECT_EQ(Count(html_, "<script"), 0u);
  EXPECT_EQ(Count(html_, "<section"), Count(html_, "</section>"));
  EXPECT_NE(html_.find("<h1>study &lt;1&gt;</h1>"), std::string::npos);
  EXPECT_NE(html_.find("compares &amp; contrasts"), std::string::npos);
}

TEST_F(ReportHtmlTest, LossChartHasOneCurvePerRunWithMetricsAndNamesTheOthers) {
  const std::string loss = SectionOf(html_, "loss");
  EXPECT_EQ(PolylinePointCounts(loss), (std::vector<size_t>{5, 3}));
  EXPECT_NE(loss.find("Not shown (no data): no-metrics, broken, crashed."), std::string::npos) << loss;
}

TEST_F(ReportHtmlTest, AccuracyChartHasAPointPerEpochForEveryRunWithASummary) {
  const std::string accuracy = SectionOf(html_, "accuracy");
  EXPECT_EQ(PolylinePointCounts(accuracy), (std::vector<size_t>{2, 2, 2}));
  EXPECT_NE(accuracy.find("Not shown (no data): broken, crashed."), std::string::npos) << accuracy;
}

TEST_F(ReportHtmlTest, EpochsAreCountedFromOneOnWholeNumberTicks) {
  // epochs_detail numbers epochs 0 and 1; the log calls them epoch 1/2 and 2/2.
  EXPECT_EQ(XTickLabels(SectionOf(html_, "accuracy")), (std::vector<std::string>{"1", "2"}));
}

TEST(ReportHtml, OneEpochOrAFewStepsStillGetWholeNumberTicks) {
  TempDir dir;
  WriteBytes(dir / "metrics.csv", "step,loss\n2,2.3\n3,2.1\n");
  const nlohmann::json summary = {{"status", "ok"},
                                  {"epochs_detail", nlohmann::json::array({{{"epoch", 0}, {"test_accuracy", 12.5}}})}};
  const std::string html = ReportHtml(ComparePlan{}, {{"one", dir.path(), 0, summary}});
  EXPECT_EQ(XTickLabels(SectionOf(html, "accuracy")), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(XTickLabels(SectionOf(html, "loss")), (std::vector<std::string>{"2", "3"}));
}

TEST_F(ReportHtmlTest, BarChartsShowEachRunsMeanThroughputPeakMemoryAndTimeSplit) {
  const std::string throughput = SectionOf(html_, "throughput");
  EXPECT_EQ(Count(throughput, "class=\"bar\""), 3u);
  EXPECT_NE(throughput.find("fast / images/s: 500<"), std::string::npos) << "mean of 400 and 600: " << throughput;
  EXPECT_NE(throughput.find("no-metrics / images/s: 50<"), std::string::npos) << throughput;
  const std::string memory = SectionOf(html_, "memory");
  EXPECT_NE(memory.find("base&lt;&amp;&gt;&quot;line&#39; / MiB: 5<"), std::string::npos) << "max over ranks: " << memory;
  const std::string time = SectionOf(html_, "time");
  EXPECT_EQ(Count(time, "class=\"bar\""), 9u) << "data wait, compute, communication for 3 runs";
  EXPECT_NE(time.find("fast / compute: 8<"), std::string::npos) << "summed over epochs: " << time;
  EXPECT_NE(time.find("Not shown (no data): broken, crashed."), std::string::npos);
}

TEST_F(ReportHtmlTest, PerClassBarsAreGroupedByNamedClass) {
  const std::string per_class = SectionOf(html_, "per-class");
  EXPECT_EQ(Count(per_class, "class=\"bar\""), 6u) << "2 classes x 3 runs";
  EXPECT_NE(per_class.find("dog / fast: 93<"), std::string::npos) << per_class;
}

TEST_F(ReportHtmlTest, TableShowsFailedRunsAsFailedWithTheirError) {
  const std::string table = SectionOf(html_, "results");
  EXPECT_EQ(Count(table, "<tr class=\"ok\">"), 3u);
  EXPECT_EQ(Count(table, "<tr class=\"failed\">"), 2u);
  EXPECT_NE(table.find("failed: <span class=\"error\">data folder &#39;x&#39; is missing</span>"), std::string::npos);
  EXPECT_NE(table.find("failed: <span class=\"error\">exit code 134, no summary.json</span>"), std::string::npos);
  EXPECT_NE(table.find("<td>ddp</td><td>fp32</td><td>2</td><td>64</td><td>ok</td><td>91.50</td><td>12.3</td>"
                       "<td>500</td><td>3</td>"),
            std::string::npos) << table;
}

TEST_F(ReportHtmlTest, EscapesHtmlInRunNamesEverywhere) {
  EXPECT_EQ(html_.find("<&>"), std::string::npos);
  EXPECT_EQ(html_.find("line'"), std::string::npos);
  EXPECT_GE(Count(html_, "base&lt;&amp;&gt;&quot;line&#39;"), 5u) << "table, curves and bars";
}

// The y of the x axis and of the x axis title under it, in a chart's SVG.
std::pair<double, double> XAxisAndTitleY(const std::string& svg) {
  const size_t axis = svg.find("y1=\"", svg.rfind("<line class=\"axis\"")) + 4;
  const size_t title = svg.find("y=\"", svg.find("<text class=\"label\"")) + 3;
  return {std::stod(svg.substr(axis)), std::stod(svg.substr(title))};
}

TEST(ReportHtml, BarChartsMakeRoomUnderTheBarsForTheirRotatedLabels) {
  const nlohmann::json summary = {
      {"status", "ok"}, {"epochs_detail", nlohmann::json::array({{{"epoch", 0}, {"images_per_second", 10.0}}})}};
  const auto gap_for = [&](const std::string& name) {
    const auto [axis, title] = XAxisAndTitleY(SectionOf(ReportHtml(ComparePlan{}, {{name, "/nonexistent", 0, summary}}), "throughput"));
    return title - axis;
  };
  // An 18-character label at 35 degrees reaches about 18 x 7 px x sin(35) + 12 px = 84 px down.
  EXPECT_GT(gap_for("a-long-run-name-18"), 12 + 84);
  EXPECT_LT(gap_for("ab"), gap_for("a-long-run-name-18")) << "short names keep the chart compact";
}

TEST(ReportHtml, MatrixRowsSharingALongHeadStayTellableApartInCharts) {
  const nlohmann::json summary = {
      {"status", "ok"}, {"epochs_detail", nlohmann::json::array({{{"epoch", 0}, {"images_per_second", 10.0}}})}};
  std::vector<ComparisonRow> rows;
  for (const char* name : {"baseline/num-workers=0", "baseline/num-workers=2", "baseline/num-workers=4"}) {
    rows.push_back({name, "/nonexistent", 0, summary});
  }
  const std::string very_long = "a-comparison-row-named-at-great-length/num-workers=8";
  rows.push_back({very_long, "/nonexistent", 0, summary});
  const std::string bars = SectionOf(ReportHtml(ComparePlan{}, rows), "throughput");
  for (const char* name : {"baseline/num-workers=0", "baseline/num-workers=2", "baseline/num-workers=4"}) {
    EXPECT_NE(bars.find(std::string(">") + name + "<"), std::string::npos) << name << " drawn whole: " << bars;
  }
  EXPECT_NE(bars.find(">a-comparison-row-nam~ength/num-workers=8<"), std::string::npos)
      << "a longer name keeps its head and the tail that tells it apart: " << bars;
}

TEST(ReportHtml, AFailedRunShowsNoTimeOrThroughput) {
  const nlohmann::json failed = {{"status", "failed"}, {"error", "boom"}, {"total_seconds", 0.0},
                                 {"epochs_detail", nlohmann::json::array({{{"epoch", 0}, {"images_per_second", 0.0}}})}};
  const std::string table = SectionOf(ReportHtml(ComparePlan{}, {{"broken", "/nonexistent", 1, failed}}), "results");
  EXPECT_NE(table.find("boom</span></td><td>-</td><td>-</td><td>-</td>"), std::string::npos) << table;
}

TEST(ReportHtml, AQuickRunSaysSoUnderTheDescription) {
  ComparePlan plan = ParseComparePlan("name: p\ndescription: five epochs\nbase: {epochs: 5}\n"
                                      "quick: {max-steps: 50}\nruns: [{name: a}]\n", "p.yaml", true);
  const std::string html = ReportHtml(plan, {});
  EXPECT_NE(html.find("<p>five epochs</p>\n<p class=\"note\">Quick run (--quick): max-steps=50 on every run"),
            std::string::npos) << html;
}

TEST(ReportHtml, RunsWithoutAnyDataLeaveNoteInsteadOfCharts) {
  ComparePlan plan;
  plan.name = "all failed";
  const std::string html = ReportHtml(plan, {{"crashed", "/nonexistent/run", 1, nullptr}});
  EXPECT_EQ(Count(html, "<svg"), 0u);
  EXPECT_EQ(Count(html, "No run has data for this chart."), 6u);
  EXPECT_NE(html.find("exit code 1, no summary.json"), std::string::npos);
}

TEST(HtmlEscape, ReplacesEverySpecialCharacter) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'd"), "a&lt;b&gt;&amp;&quot;c&#39;d");
  EXPECT_EQ(HtmlEscape("plain"), "plain");
}

}  // namespace
}  // namespace mgpu
