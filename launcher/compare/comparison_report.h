// The results of a comparison: one row per run (its summary.json, or why it has none), written
// as comparison.csv, comparison.json, report.md and report.html (launcher/compare/report_html.h), and
// printed as a table on the terminal.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/compare/compare_plan.h"
#include "report/run_summary.h"

namespace mgpu {

// The record of a summary.json's parsed text; nullopt unless it is a JSON object.
std::optional<RunSummary> SummaryOf(const nlohmann::json& parsed);

// One execution of a planned run.
struct RunSample {
  RunSample() = default;
  RunSample(std::string folder, int exit_code, const nlohmann::json& parsed_summary)
      : folder(std::move(folder)), exit_code(exit_code), summary(SummaryOf(parsed_summary)) {}

  std::string folder;                 // its output folder
  int exit_code = 0;                  // mgpu-worker's (or mgpu run's) exit code
  std::optional<RunSummary> summary;  // its summary.json; nullopt if it wrote none
};

// A planned run as reported: the execution that stands for it, and every repeat (`mgpu compare
// --repeat N`). The one that stands for it is the first failed repeat if any failed, else the
// repeat of median throughput (launcher/compare/repeat_stats.h).
struct ComparisonRow {
  ComparisonRow() = default;
  // A row of one run, with no repeats recorded.
  ComparisonRow(std::string name, std::string folder, int exit_code, const nlohmann::json& parsed_summary)
      : name(std::move(name)), folder(std::move(folder)), exit_code(exit_code), summary(SummaryOf(parsed_summary)) {}

  std::string name;
  std::string folder;        // the representative repeat's output folder
  int exit_code = 0;         // ... its exit code
  std::optional<RunSummary> summary;  // ... its summary.json; nullopt if it wrote none
  std::vector<RunSample> samples;  // every repeat, in the order they ran (empty: the row alone)
};

// Appends `sample` to `row` and makes the row's folder, exit code and summary those of the repeat
// that now stands for it.
void AddSample(ComparisonRow& row, RunSample sample);

// Training throughput of a summary: the last epoch's images/s; NaN when there is none.
double SummaryImagesPerSecond(const std::optional<RunSummary>& summary);

// Whether the run failed: a non-zero exit code, no summary.json, or a summary whose status is not
// "ok". Every report marks the same runs failed.
bool RunFailed(const ComparisonRow& row);

// Why the run failed: its summary's error, else its exit code (and that it wrote no summary).
std::string RunError(const ComparisonRow& row);

// Writes comparison.csv, comparison.json, report.md and report.html into `out` (atomically, so a report of
// the runs done so far survives an interrupted comparison).
void WriteComparison(const std::string& out, const ComparePlan& plan, const std::vector<ComparisonRow>& rows);

// A fixed-width table of the rows for the terminal.
std::string ComparisonTable(const std::vector<ComparisonRow>& rows);

}  // namespace mgpu
