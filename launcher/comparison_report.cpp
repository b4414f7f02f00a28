#include "launcher/comparison_report.h"

#include <fmt/format.h>

#include "common/files.h"
#include "launcher/report_html.h"
#include "report/csv_writer.h"

namespace mgpu {
namespace {

struct Column {
  std::string header;
  std::string (*cell)(const ComparisonRow&);
};

double Sum(const nlohmann::json& epochs, const char* key) {
  double total = 0;
  for (const auto& e : epochs) total += e.value(key, 0.0);
  return total;
}

std::string Fixed(const nlohmann::json& value, int digits) {
  return value.is_number() ? fmt::format("{:.{}f}", value.get<double>(), digits) : "-";
}

bool HasSummary(const ComparisonRow& r) { return r.summary.is_object(); }

std::string Status(const ComparisonRow& r) {
  if (!RunFailed(r)) return "ok";
  return HasSummary(r) ? fmt::format("failed (exit {})", r.exit_code)
                       : fmt::format("failed (exit {}, no summary)", r.exit_code);
}

std::string Field(const ComparisonRow& r, const char* key) {
  if (!HasSummary(r) || !r.summary.contains(key)) return "-";
  const auto& v = r.summary[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

const std::vector<Column>& Columns() {
  static const std::vector<Column> columns = {
      {"run", [](const ComparisonRow& r) { return r.name; }},
      {"mode", [](const ComparisonRow& r) { return Field(r, "mode"); }},
      {"world", [](const ComparisonRow& r) { return Field(r, "world_size"); }},
      {"precision", [](const ComparisonRow& r) { return Field(r, "precision"); }},
      {"workers", [](const ComparisonRow& r) { return Field(r, "num_workers"); }},
      {"batch", [](const ComparisonRow& r) { return Field(r, "batch_size"); }},
      {"status", Status},
      {"accuracy %", [](const ComparisonRow& r) { return HasSummary(r) ? Fixed(r.summary["test_accuracy"], 2) : "-"; }},
      {"total s", [](const ComparisonRow& r) { return HasSummary(r) ? Fixed(r.summary["total_seconds"], 1) : "-"; }},
      {"train s", [](const ComparisonRow& r) {
         return HasSummary(r) ? fmt::format("{:.1f}", Sum(r.summary["epochs_detail"], "seconds")) : "-"; }},
      {"data wait s", [](const ComparisonRow& r) {
         return HasSummary(r) ? fmt::format("{:.1f}", Sum(r.summary["epochs_detail"], "data_wait_seconds")) : "-"; }},
      {"compute s", [](const ComparisonRow& r) {
         return HasSummary(r) ? fmt::format("{:.1f}", Sum(r.summary["epochs_detail"], "compute_seconds")) : "-"; }},
      {"img/s", [](const ComparisonRow& r) {
         if (!HasSummary(r)) return std::string("-");
         const auto& epochs = r.summary["epochs_detail"];
         return epochs.empty() ? std::string("-") : Fixed(epochs.back()["images_per_second"], 0); }},
      {"peak MiB", [](const ComparisonRow& r) {
         if (!HasSummary(r) || !r.summary["peak_memory_bytes"].is_array() || r.summary["peak_memory_bytes"].empty())
           return std::string("-");
         double peak = 0;
         for (const auto& b : r.summary["peak_memory_bytes"]) peak = std::max(peak, b.get<double>());
         return fmt::format("{:.0f}", peak / (1 << 20)); }},
  };
  return columns;
}

std::string Markdown(const ComparePlan& plan, const std::vector<ComparisonRow>& rows) {
  std::string md = fmt::format("# {}\n\n", plan.name);
  if (!plan.description.empty()) md += plan.description + "\n\n";
  std::string header = "|", rule = "|";
  for (const auto& c : Columns()) {
    header += " " + c.header + " |";
    rule += " --- |";
  }
  md += header + "\n" + rule + "\n";
  for (const auto& row : rows) {
    md += "|";
    for (const auto& c : Columns()) md += " " + c.cell(row) + " |";
    md += "\n";
  }
  md += "\nTimes: `train s` is the sum of epoch times (training only), split into `data wait s` "
        "(waiting for the loader) and `compute s`; `total s` includes start-up and evaluation.\n";
  for (const auto& row : rows) {
    md += fmt::format("\n## {}\n\nOutput folder: `{}`\n", row.name, row.folder);
    if (!HasSummary(row)) {
      md += fmt::format("\nNo summary.json: the worker exited with code {} before writing one; see its "
                        "logs.\n", row.exit_code);
      continue;
    }
    if (RunFailed(row)) md += "\nError: " + RunError(row) + "\n";
    const auto& per_class = row.summary["per_class_accuracy"];
    const auto& names = row.summary.contains("class_names") ? row.summary["class_names"] : nlohmann::json::array();
    if (per_class.is_array() && !per_class.empty()) {
      md += "\n| class | accuracy % |\n| --- | --- |\n";
      for (size_t c = 0; c < per_class.size(); ++c) {
        md += fmt::format("| {} | {:.2f} |\n", c < names.size() ? names[c].get<std::string>() : std::to_string(c),
                          per_class[c].get<double>());
      }
    }
  }
  return md;
}

}  // namespace

bool RunFailed(const ComparisonRow& row) {
  return row.exit_code != 0 || !HasSummary(row) || row.summary.value("status", "") != "ok";
}

std::string RunError(const ComparisonRow& row) {
  if (HasSummary(row) && row.summary.contains("error") && row.summary["error"].is_string() &&
      !row.summary["error"].get<std::string>().empty()) {
    return row.summary["error"].get<std::string>();
  }
  return HasSummary(row) ? fmt::format("exit code {}", row.exit_code)
                         : fmt::format("exit code {}, no summary.json", row.exit_code);
}

void WriteComparison(const std::string& out, const ComparePlan& plan, const std::vector<ComparisonRow>& rows) {
  std::string csv;
  for (size_t i = 0; i < Columns().size(); ++i) csv += (i ? "," : "") + CsvEscape(Columns()[i].header);
  csv += ",folder,error\n";
  for (const auto& row : rows) {
    for (size_t i = 0; i < Columns().size(); ++i) csv += (i ? "," : "") + CsvEscape(Columns()[i].cell(row));
    csv += "," + CsvEscape(row.folder) + "," + CsvEscape(RunFailed(row) ? RunError(row) : "") + "\n";
  }
  WriteFileAtomically(out + "/comparison.csv", csv);

  nlohmann::json runs = nlohmann::json::array();
  for (const auto& row : rows) {
    runs.push_back({{"name", row.name}, {"folder", row.folder}, {"exit_code", row.exit_code},
                    {"summary", row.summary}});
  }
  const nlohmann::json doc = {{"name", plan.name}, {"description", plan.description}, {"runs", runs}};
  WriteFileAtomically(out + "/comparison.json", doc.dump(2) + "\n");
  WriteFileAtomically(out + "/report.md", Markdown(plan, rows));
  WriteFileAtomically(out + "/report.html", ReportHtml(plan, rows));
}

std::string ComparisonTable(const std::vector<ComparisonRow>& rows) {
  std::vector<size_t> widths;
  for (const auto& c : Columns()) {
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
  std::string table = line([&](size_t i) { return Columns()[i].header; });
  table += line([&](size_t i) { return std::string(widths[i], '-'); });
  for (const auto& row : rows) table += line([&](size_t i) { return Columns()[i].cell(row); });
  return table;
}

}  // namespace mgpu
