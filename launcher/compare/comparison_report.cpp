#include "launcher/compare/comparison_report.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "common/files.h"
#include "launcher/compare/repeat_stats.h"
#include "launcher/compare/report_html.h"
#include "report/csv_writer.h"

namespace mgpu {
namespace {

struct Column {
  std::string header;
  std::string (*cell)(const ComparisonRow&);
};

// The sum over a run's epochs of one of their numbers (an absent one counts 0).
double Sum(const std::vector<EpochRecord>& epochs, double EpochRecord::*number) {
  double total = 0;
  for (const EpochRecord& e : epochs) total += std::isnan(e.*number) ? 0.0 : e.*number;
  return total;
}

std::string Fixed(const std::optional<double>& value, int digits) {
  return value ? fmt::format("{:.{}f}", *value, digits) : "-";
}

bool HasSummary(const ComparisonRow& r) { return r.summary.has_value(); }

// A failed run's times and throughput mean nothing (it stopped early, or never started): "-".
bool HasResults(const ComparisonRow& r) { return HasSummary(r) && !RunFailed(r); }

// The throughput of every repeat, when the row ran more than once and every repeat succeeded.
std::optional<RepeatStats> ThroughputStats(const ComparisonRow& r) {
  if (r.samples.size() < 2) return std::nullopt;
  std::vector<double> rates;
  for (const RunSample& sample : r.samples) {
    const double rate = SummaryImagesPerSecond(sample.summary);
    if (sample.exit_code != 0 || !std::isfinite(rate)) return std::nullopt;
    rates.push_back(rate);
  }
  return SummarizeRepeats(rates);
}

std::string Outliers(const ComparisonRow& r) {
  const std::optional<RepeatStats> stats = ThroughputStats(r);
  if (!stats || stats->outliers.empty()) return "-";
  std::vector<std::string> named;
  for (size_t i : stats->outliers) {
    named.push_back(fmt::format("repeat {} ({:.0f} img/s)", i + 1, SummaryImagesPerSecond(r.samples[i].summary)));
  }
  return fmt::format("{}", fmt::join(named, "; "));
}

std::string Status(const ComparisonRow& r) {
  if (!RunFailed(r)) return "ok";
  if (HasSummary(r) && r.summary->status == "interrupted") return fmt::format("interrupted (exit {})", r.exit_code);
  return HasSummary(r) ? fmt::format("failed (exit {})", r.exit_code)
                       : fmt::format("failed (exit {}, no summary)", r.exit_code);
}

std::string Text(const ComparisonRow& r, std::string RunSummary::*field) {
  return HasSummary(r) && !((*r.summary).*field).empty() ? (*r.summary).*field : "-";
}

std::string Count(const ComparisonRow& r, int64_t RunSummary::*field) {
  return HasSummary(r) ? std::to_string((*r.summary).*field) : "-";
}

std::vector<Column> Columns(const std::vector<ComparisonRow>& rows) {
  std::vector<Column> columns = {
      {"run", [](const ComparisonRow& r) { return r.name; }},
      {"mode", [](const ComparisonRow& r) { return Text(r, &RunSummary::mode); }},
      {"world", [](const ComparisonRow& r) { return Count(r, &RunSummary::world_size); }},
      {"precision", [](const ComparisonRow& r) { return Text(r, &RunSummary::precision); }},
      {"workers", [](const ComparisonRow& r) { return Count(r, &RunSummary::num_workers); }},
      {"batch", [](const ComparisonRow& r) { return Count(r, &RunSummary::batch_size); }},
      {"status", Status},
      {"accuracy %", [](const ComparisonRow& r) { return HasSummary(r) ? Fixed(r.summary->test_accuracy, 2) : "-"; }},
      {"total s", [](const ComparisonRow& r) { return HasResults(r) ? Fixed(r.summary->total_seconds, 1) : "-"; }},
      {"train s", [](const ComparisonRow& r) {
         return HasResults(r) ? fmt::format("{:.1f}", Sum(r.summary->epochs_detail, &EpochRecord::seconds)) : "-"; }},
      {"data wait s", [](const ComparisonRow& r) {
         return HasResults(r) ? fmt::format("{:.1f}", Sum(r.summary->epochs_detail, &EpochRecord::data_wait_seconds))
                              : "-"; }},
      {"compute s", [](const ComparisonRow& r) {
         return HasResults(r) ? fmt::format("{:.1f}", Sum(r.summary->epochs_detail, &EpochRecord::compute_seconds))
                              : "-"; }},
      {"img/s", [](const ComparisonRow& r) {
         if (const std::optional<RepeatStats> stats = ThroughputStats(r)) return fmt::format("{:.0f}", stats->median);
         const double rate = HasResults(r) ? SummaryImagesPerSecond(r.summary) : NAN;
         return std::isfinite(rate) ? fmt::format("{:.0f}", rate) : std::string("-"); }},
      {"peak MiB", [](const ComparisonRow& r) {
         if (!HasSummary(r) || r.summary->peak_memory_bytes.empty()) return std::string("-");
         double peak = 0;
         for (int64_t b : r.summary->peak_memory_bytes) peak = std::max(peak, static_cast<double>(b));
         return fmt::format("{:.0f}", peak / (1 << 20)); }},
  };
  // With --repeat: how many ran, how far their throughputs spread, and which strayed.
  const bool repeated = std::any_of(rows.begin(), rows.end(), [](const ComparisonRow& r) { return r.samples.size() > 1; });
  if (repeated) {
    columns.push_back({"repeats", [](const ComparisonRow& r) { return std::to_string(std::max<size_t>(1, r.samples.size())); }});
    columns.push_back({"img/s spread %", [](const ComparisonRow& r) {
                         const std::optional<RepeatStats> stats = ThroughputStats(r);
                         return stats ? fmt::format("{:.1f}", 100 * stats->spread) : std::string("-"); }});
    columns.push_back({"outliers", Outliers});
  }
  return columns;
}

std::string Markdown(const ComparePlan& plan, const std::vector<ComparisonRow>& rows) {
  std::string md = fmt::format("# {}\n\n", plan.name);
  if (!plan.description.empty()) md += plan.description + "\n\n";
  if (!QuickRunNote(plan).empty()) md += QuickRunNote(plan) + "\n\n";
  const std::vector<Column> columns = Columns(rows);
  std::string header = "|", rule = "|";
  for (const auto& c : columns) {
    header += " " + c.header + " |";
    rule += " --- |";
  }
  md += header + "\n" + rule + "\n";
  for (const auto& row : rows) {
    md += "|";
    for (const auto& c : columns) md += " " + c.cell(row) + " |";
    md += "\n";
  }
  md += "\nTimes: `train s` is the sum of epoch times (training only), split into `data wait s` "
        "(waiting for the loader) and `compute s`; `total s` includes start-up and evaluation.\n";
  if (std::any_of(rows.begin(), rows.end(), [](const ComparisonRow& r) { return r.samples.size() > 1; })) {
    md += fmt::format("\nRepeats: each row's `img/s` is the median of its repeats, and its other columns "
                      "those of the median repeat; `img/s spread %` is (max - min) / median; a repeat more "
                      "than {:.0f}% from the median is an outlier.\n", 100 * kOutlierFraction);
  }
  for (const auto& row : rows) {
    md += fmt::format("\n## {}\n\nOutput folder: `{}`\n", row.name, row.folder);
    if (!HasSummary(row)) {
      md += fmt::format("\nNo summary.json: the worker exited with code {} before writing one; see its "
                        "logs.\n", row.exit_code);
      continue;
    }
    if (RunFailed(row)) md += "\nError: " + RunError(row) + "\n";
    const std::vector<double>& per_class = row.summary->per_class_accuracy;
    const std::vector<std::string> names = row.summary->class_names.value_or(std::vector<std::string>());
    if (!per_class.empty()) {
      md += "\n| class | accuracy % |\n| --- | --- |\n";
      for (size_t c = 0; c < per_class.size(); ++c) {
        md += fmt::format("| {} | {:.2f} |\n", c < names.size() ? names[c] : std::to_string(c), per_class[c]);
      }
    }
  }
  return md;
}

}  // namespace

std::optional<RunSummary> SummaryOf(const nlohmann::json& parsed) {
  if (!parsed.is_object()) return std::nullopt;
  return RunSummaryFromJson(parsed);
}

double SummaryImagesPerSecond(const std::optional<RunSummary>& summary) {
  return summary ? summary->LastImagesPerSecond() : NAN;
}

void AddSample(ComparisonRow& row, RunSample sample) {
  row.samples.push_back(std::move(sample));
  const RunSample* chosen = nullptr;
  for (const RunSample& s : row.samples) {
    const bool failed = s.exit_code != 0 || !s.summary || s.summary->status != "ok";
    if (failed) {
      chosen = &s;
      break;
    }
  }
  if (chosen == nullptr) {
    std::vector<double> rates;
    for (const RunSample& s : row.samples) rates.push_back(SummaryImagesPerSecond(s.summary));
    const bool measurable = std::all_of(rates.begin(), rates.end(), [](double r) { return std::isfinite(r); });
    chosen = &row.samples[measurable ? SummarizeRepeats(rates).representative : row.samples.size() - 1];
  }
  row.folder = chosen->folder;
  row.exit_code = chosen->exit_code;
  row.summary = chosen->summary;
}

bool RunFailed(const ComparisonRow& row) {
  return row.exit_code != 0 || !HasSummary(row) || row.summary->status != "ok";
}

std::string RunError(const ComparisonRow& row) {
  if (HasSummary(row) && !row.summary->error.empty()) return row.summary->error;
  return HasSummary(row) ? fmt::format("exit code {}", row.exit_code)
                         : fmt::format("exit code {}, no summary.json", row.exit_code);
}

void WriteComparison(const std::string& out, const ComparePlan& plan, const std::vector<ComparisonRow>& rows) {
  const std::vector<Column> columns = Columns(rows);
  std::string csv;
  for (size_t i = 0; i < columns.size(); ++i) csv += (i ? "," : "") + CsvEscape(columns[i].header);
  csv += ",folder,error\n";
  for (const auto& row : rows) {
    for (size_t i = 0; i < columns.size(); ++i) csv += (i ? "," : "") + CsvEscape(columns[i].cell(row));
    csv += "," + CsvEscape(row.folder) + "," + CsvEscape(RunFailed(row) ? RunError(row) : "") + "\n";
  }
  WriteFileAtomically(out + "/comparison.csv", csv);

  nlohmann::json runs = nlohmann::json::array();
  for (const auto& row : rows) {
    nlohmann::json entry = {{"name", row.name}, {"folder", row.folder}, {"exit_code", row.exit_code},
                            {"summary", row.summary ? row.summary->ToJson() : nlohmann::json()}};
    if (row.samples.size() > 1) {
      nlohmann::json repeats = nlohmann::json::array();
      for (const RunSample& s : row.samples) {
        const double rate = SummaryImagesPerSecond(s.summary);
        repeats.push_back({{"folder", s.folder}, {"exit_code", s.exit_code},
                           {"images_per_second", std::isfinite(rate) ? nlohmann::json(rate) : nlohmann::json()}});
      }
      entry["repeats"] = repeats;
      if (const std::optional<RepeatStats> stats = ThroughputStats(row)) {
        entry["images_per_second"] = {{"median", stats->median}, {"min", stats->min}, {"max", stats->max},
                                      {"spread", stats->spread}, {"outlier_repeats", nlohmann::json::array()}};
        for (size_t i : stats->outliers) entry["images_per_second"]["outlier_repeats"].push_back(i + 1);
      }
    }
    runs.push_back(entry);
  }
  nlohmann::json doc = {{"name", plan.name}, {"description", plan.description}, {"runs", runs}};
  if (!plan.quick_overrides.empty()) doc["quick_note"] = QuickRunNote(plan);
  WriteFileAtomically(out + "/comparison.json", doc.dump(2) + "\n");
  WriteFileAtomically(out + "/report.md", Markdown(plan, rows));
  WriteFileAtomically(out + "/report.html", ReportHtml(plan, rows));
}

std::string ComparisonTable(const std::vector<ComparisonRow>& rows) {
  const std::vector<Column> columns = Columns(rows);
  std::vector<size_t> widths;
  for (const auto& c : columns) {
    size_t w = c.header.size();
    for (const auto& row : rows) w = std::max(w, c.cell(row).size());
    widths.push_back(w);
  }
  auto line = [&](auto cell_of) {
    std::string text;
    for (size_t i = 0; i < widths.size(); ++i) text += fmt::format("{:<{}}  ", cell_of(i), widths[i]);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + "\n";
  };
  std::string table = line([&](size_t i) { return columns[i].header; });
  table += line([&](size_t i) { return std::string(widths[i], '-'); });
  for (const auto& row : rows) table += line([&](size_t i) { return columns[i].cell(row); });
  return table;
}

}  // namespace mgpu
