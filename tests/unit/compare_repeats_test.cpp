// Specification of `mgpu compare --repeat N`'s statistics and of how a row is reported: the median
// repeat stands for the row, a repeat far from the median is flagged, and a failed run shows no
// times.
#include <cmath>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launcher/compare/compare_plan.h"
#include "launcher/compare/comparison_report.h"
#include "launcher/compare/repeat_stats.h"

namespace mgpu {
namespace {

TEST(SummarizeRepeats, OneSampleIsItsOwnMedianWithNoSpreadAndNoOutlier) {
  const RepeatStats s = SummarizeRepeats({120});
  EXPECT_EQ(s.representative, 0u);
  EXPECT_EQ(s.median, 120);
  EXPECT_EQ(s.spread, 0);
  EXPECT_TRUE(s.outliers.empty());
}

TEST(SummarizeRepeats, AHundredTimesSlowRepeatIsFlaggedAndDoesNotMoveTheMedian) {
  const RepeatStats s = SummarizeRepeats({19447, 158, 19210});
  EXPECT_EQ(s.representative, 2u);
  EXPECT_EQ(s.median, 19210);
  EXPECT_EQ(s.min, 158);
  EXPECT_EQ(s.max, 19447);
  EXPECT_EQ(s.outliers, std::vector<size_t>({1}));
}

TEST(SummarizeRepeats, NoiseWithinAQuarterOfTheMedianIsNotAnOutlier) {
  const RepeatStats s = SummarizeRepeats({100, 95, 110, 104, 90});
  EXPECT_EQ(s.median, 100);
  EXPECT_NEAR(s.spread, 0.20, 1e-12);
  EXPECT_TRUE(s.outliers.empty());
}

TEST(SummarizeRepeats, TwoSamplesThatDisagreeAreBothFlaggedAndTheFasterStandsForTheRow) {
  const RepeatStats s = SummarizeRepeats({158, 19447});
  EXPECT_EQ(s.representative, 1u) << "a disturbance only ever slows a run";
  EXPECT_DOUBLE_EQ(s.median, (158 + 19447) / 2.0);
  EXPECT_EQ(s.outliers, std::vector<size_t>({0, 1}));
}

TEST(SummarizeRepeats, RefusesNoSamplesAndNonFiniteOnes) {
  EXPECT_THROW(SummarizeRepeats({}), std::invalid_argument);
  EXPECT_THROW(SummarizeRepeats({1, NAN}), std::invalid_argument);
}

nlohmann::json Summary(const std::string& status, double images_per_second, double total_seconds) {
  return {{"status", status}, {"total_seconds", total_seconds},
          {"epochs_detail", nlohmann::json::array({{{"epoch", 0}, {"images_per_second", images_per_second},
                                                    {"seconds", total_seconds}}})}};
}

TEST(AddSample, TheMedianRepeatStandsForTheRow) {
  ComparisonRow row{"r", "", 0, nullptr};
  AddSample(row, {"r/repeat-1", 0, Summary("ok", 19447, 3.0)});
  AddSample(row, {"r/repeat-2", 0, Summary("ok", 158, 300.0)});
  AddSample(row, {"r/repeat-3", 0, Summary("ok", 19210, 3.1)});
  EXPECT_EQ(row.folder, "r/repeat-3");
  EXPECT_EQ(row.summary->total_seconds, 3.1);
  EXPECT_EQ(row.samples.size(), 3u);
}

TEST(AddSample, AFailedRepeatMakesTheRowFailedWithItsError) {
  ComparisonRow row{"r", "", 0, nullptr};
  AddSample(row, {"r/repeat-1", 0, Summary("ok", 100, 3.0)});
  AddSample(row, {"r/repeat-2", 3, Summary("diverged", 100, 1.0)});
  AddSample(row, {"r/repeat-3", 0, Summary("ok", 100, 3.0)});
  EXPECT_EQ(row.folder, "r/repeat-2");
  EXPECT_TRUE(RunFailed(row));
}

// The cells of the row named `name` in ComparisonTable's output, split on runs of 2+ spaces.
std::vector<std::string> TableRow(const std::string& table, const std::string& name) {
  const size_t begin = table.find("\n" + name + " ") + 1;
  const std::string line = table.substr(begin, table.find('\n', begin) - begin);
  std::vector<std::string> cells;
  for (size_t at = 0; at < line.size();) {
    const size_t gap = line.find("  ", at);
    cells.push_back(line.substr(at, gap - at));
    if (gap == std::string::npos) break;
    at = line.find_first_not_of(' ', gap);
  }
  return cells;
}

TEST(ComparisonTable, RepeatedRowsShowTheMedianTheSpreadAndTheOutlier) {
  ComparisonRow row{"steady", "", 0, nullptr};
  for (double rate : {19447.0, 158.0, 19210.0}) AddSample(row, {"f", 0, Summary("ok", rate, 3.0)});
  const std::string table = ComparisonTable({row});
  EXPECT_NE(table.find("repeats"), std::string::npos) << table;
  const std::vector<std::string> cells = TableRow(table, "steady");
  ASSERT_GE(cells.size(), 5u) << table;
  EXPECT_EQ(cells[cells.size() - 5], "19210") << "img/s is the median: " << table;
  EXPECT_EQ(cells[cells.size() - 3], "3") << table;
  EXPECT_EQ(cells.back(), "repeat 2 (158 img/s)") << table;
}

TEST(ComparisonTable, WithoutRepeatsThereAreNoRepeatColumns) {
  const std::string table = ComparisonTable({{"once", "", 0, Summary("ok", 100, 3.0)}});
  EXPECT_EQ(table.find("repeats"), std::string::npos) << table;
}

TEST(ComparisonTable, AFailedRunShowsNoTimesOrThroughput) {
  const std::string table = ComparisonTable({{"broken", "", 1, Summary("failed", 0, 0.0)}});
  EXPECT_EQ(table.find("0.0"), std::string::npos) << "no time of 0.0 for a run that did not train: " << table;
}

TEST(QuickRunNote, SaysWhatQuickChangedSoTheDescriptionIsNotTakenForWhatRan) {
  const std::string plan_text = "name: p\ndescription: five epochs\nbase: {epochs: 5}\nquick: {max-steps: 50}\n"
                                "runs: [{name: a}]\n";
  EXPECT_EQ(QuickRunNote(ParseComparePlan(plan_text, "p.yaml", false)), "");
  EXPECT_EQ(QuickRunNote(ParseComparePlan(plan_text, "p.yaml", true)),
            "Quick run (--quick): max-steps=50 on every run; the description is of the full runs.");
}

}  // namespace
}  // namespace mgpu
