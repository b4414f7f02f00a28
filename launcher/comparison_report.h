// The results of a comparison: one row per run (its summary.json, or why it has none), written
// as comparison.csv, comparison.json, report.md and report.html (launcher/report_html.h), and
// printed as a table on the terminal.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/compare_plan.h"

namespace mgpu {

struct ComparisonRow {
  std::string name;
  std::string folder;        // the run's output folder
  int exit_code = 0;         // mgpu-worker's exit code
  nlohmann::json summary;    // the run's summary.json; null if it wrote none
};

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
