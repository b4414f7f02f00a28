// report.html: a comparison's results as one self-contained page (inline CSS and SVG, no scripts,
// fonts or links), so it opens offline and can be mailed or archived as a single file.
//
// It holds the results table (failed runs marked failed with their error) and charts drawn here
// as SVG: training loss per step (each run's <folder>/metrics.csv), test accuracy per epoch,
// throughput, peak memory, data wait vs compute time, and per-class accuracy. A run without data
// for a chart (no summary, no metrics.csv) is left out of that chart and named in its caption.
#pragma once

#include <string>
#include <vector>

#include "launcher/compare/compare_plan.h"
#include "launcher/compare/comparison_report.h"

namespace mgpu {

// The whole page. Reads each row's metrics.csv; a missing or unreadable one only drops that run
// from the loss chart. Every string taken from the plan or the runs is HTML-escaped.
std::string ReportHtml(const ComparePlan& plan, const std::vector<ComparisonRow>& rows);

// `text` with & < > " ' replaced by character references.
std::string HtmlEscape(const std::string& text);

}  // namespace mgpu
