#include "launcher/compare/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "common/files.h"

namespace mgpu {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1024.0 * 1024.0;
// A long run logs tens of thousands of steps; more points than pixels only bloats the file.
constexpr size_t kMaxCurvePoints = 2000;
// Longest run or class name drawn inside a chart, under the bars (rotated, the chart grows to fit)
// and in the legend (its column is 166 px, about 24 characters, and the svg may overflow into the
// page's margin); the full name is in the tooltip and the table.
constexpr size_t kMaxLabelChars = 40, kMaxLegendChars = 30;
// Bar charts' category labels: rotated by this angle (radians) so that long names fit under narrow
// bars, in 12 px text whose characters are at most this wide (px) and lines this high.
constexpr double kLabelAngle = 35 * M_PI / 180, kLabelCharWidth = 7, kLabelHeight = 12;

// Tableau 10: distinguishable, and still tellable apart in greyscale print.
const char* RunColor(size_t index) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[index % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

using Points = std::vector<std::pair<double, double>>;

// What the charts need from one run; NaN or empty where the run has no such data.
struct RunData {
  std::string name;
  std::string color;
  Points loss;             // (step, training loss) from metrics.csv
  Points accuracy;         // (epoch, test accuracy %)
  double images_per_second = kNaN;
  double peak_mib = kNaN;
  double data_wait_seconds = kNaN, compute_seconds = kNaN, comm_seconds = kNaN;
  std::vector<double> per_class;  // accuracy % per class
};

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> fields(1);
  for (char c : line) {
    if (c == ',') fields.emplace_back();
    else if (c != '\r') fields.back().push_back(c);
  }
  return fields;
}

bool ParseNumber(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*value);
}

// The (step, loss) curve of metrics.csv; empty when the file is missing or has no usable rows
// (a run that failed before its first step). Rows with a non-finite loss (divergence) are skipped.
Points ReadLossCurve(const std::string& folder) {
  const std::string path = folder + "/metrics.csv";
  if (!IsRegularFile(path)) return {};
  std::string text;
  try {
    text = ReadFile(path);
  } catch (const std::exception&) {
    return {};
  }
  Points points;
  size_t step_column = std::string::npos, loss_column = std::string::npos;
  size_t begin = 0;
  bool header = true;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::vector<std::string> fields = SplitCsvLine(text.substr(begin, end - begin));
    begin = end + 1;
    if (header) {
      header = false;
      for (size_t i = 0; i < fields.size(); ++i) {
        if (fields[i] == "step") step_column = i;
        if (fields[i] == "loss") loss_column = i;
      }
      if (step_column == std::string::npos || loss_column == std::string::npos) return {};
      continue;
    }
    double step = 0, loss = 0;
    if (std::max(step_column, loss_column) < fields.size() && ParseNumber(fields[step_column], &step) &&
        ParseNumber(fields[loss_column], &loss)) {
      points.emplace_back(step, loss);
    }
  }
  if (points.size() <= kMaxCurvePoints) return points;
  Points thinned;
  const size_t stride = (points.size() + kMaxCurvePoints - 1) / kMaxCurvePoints;
  for (size_t i = 0; i < points.size(); i += stride) thinned.push_back(points[i]);
  if (thinned.back() != points.back()) thinned.push_back(points.back());
  return thinned;
}

RunData Extract(const ComparisonRow& row, size_t index) {
  RunData run;
  run.name = row.name;
  run.color = RunColor(index);
  run.loss = ReadLossCurve(row.folder);
  if (!row.summary) return run;
  const RunSummary& s = *row.summary;
  const std::vector<EpochRecord>& epochs = s.epochs_detail;
  double throughput_sum = 0, wait = 0, compute = 0, comm = 0;
  int throughput_count = 0;
  for (const EpochRecord& e : epochs) {
    // epochs_detail counts epochs from 0, as metrics.csv does; the chart counts from 1, as the
    // log's "epoch 1/N" and the reader do.
    const double epoch = static_cast<double>(e.epoch) + 1;
    if (std::isfinite(e.test_accuracy)) run.accuracy.emplace_back(epoch, e.test_accuracy);
    if (std::isfinite(e.images_per_second)) {
      throughput_sum += e.images_per_second;
      ++throughput_count;
    }
    if (std::isfinite(e.data_wait_seconds)) wait += e.data_wait_seconds;
    if (std::isfinite(e.compute_seconds)) compute += e.compute_seconds;
    if (std::isfinite(e.comm_seconds)) comm += e.comm_seconds;
  }
  if (throughput_count > 0) run.images_per_second = throughput_sum / throughput_count;
  if (!epochs.empty()) {
    run.data_wait_seconds = wait;
    run.compute_seconds = compute;
    run.comm_seconds = comm;
  }
  for (int64_t bytes : s.peak_memory_bytes) {
    const double mib = static_cast<double>(bytes) / kMiB;
    run.peak_mib = std::isnan(run.peak_mib) ? mib : std::max(run.peak_mib, mib);
  }
  for (double accuracy : s.per_class_accuracy) run.per_class.push_back(std::isfinite(accuracy) ? accuracy : kNaN);
  return run;
}

// Cuts the middle out of a long label, keeping its head and its tail: matrix rows share their head
// ("baseline/num-workers=0", "baseline/num-workers=4") and differ at the end.
std::string Truncate(const std::string& text, size_t max_chars = kMaxLabelChars) {
  if (text.size() <= max_chars) return text;
  const size_t tail = (max_chars - 1) / 2, head = max_chars - 1 - tail;
  return text.substr(0, head) + "~" + text.substr(text.size() - tail);
}

// Round tick positions (1, 2 or 5 times a power of ten, and at least `min_step` apart) covering
// [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, double min_step = 0) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {2.0, 5.0, 10.0}) {
    if (step >= raw) break;
    step = m * magnitude;
  }
  step = std::max(step, min_step);
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t < hi + step * 0.999; t += step) ticks.push_back(t);
  return ticks;
}

std::string TickLabel(double value, double step) {
  const int digits = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  const double shown = std::abs(value) < step * 1e-6 ? 0 : value;  // no "-0.0" from rounding
  return fmt::format("{:.{}f}", shown, digits);
}

struct ChartText {
  std::string title, x_label, y_label;
};

struct LegendEntry {
  std::string name, color;
};

// The frame shared by all charts: title, axis labels, y grid with tick labels, legend on the right.
// `bottom_margin` is the room under the plot for the x tick labels and the x axis title.
class Frame {
 public:
  static constexpr double kWidth = 760, kLeft = 70, kTop = 40, kRight = 760 - 200;

  Frame(const ChartText& text, double plot_height, double bottom_margin, double y_lo, double y_hi)
      : bottom_(kTop + plot_height) {
    const double height = bottom_ + bottom_margin;
    y_ticks_ = NiceTicks(y_lo, y_hi);
    svg_ = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\">"
        "<title>{2}</title>\n<text class=\"title\" x=\"{3}\" y=\"22\" text-anchor=\"middle\">{2}</text>\n",
        kWidth, height, HtmlEscape(text.title), (kLeft + kRight) / 2);
    const double step = y_ticks_.size() > 1 ? y_ticks_[1] - y_ticks_[0] : 1;
    for (double t : y_ticks_) {
      svg_ += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\"/>"
                          "<text class=\"tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                          kLeft, kRight, Y(t), kLeft - 6, Y(t) + 4, TickLabel(t, step));
    }
    svg_ += fmt::format("<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
                        "<line class=\"axis\" x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\"/>\n",
                        kLeft, kTop, bottom_, kRight);
    svg_ += fmt::format("<text class=\"label\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">{2}</text>\n"
                        "<text class=\"label\" transform=\"translate(16 {3}) rotate(-90)\" text-anchor=\"middle\">{4}</text>\n",
                        (kLeft + kRight) / 2, height - 8, HtmlEscape(text.x_label), (kTop + bottom_) / 2,
                        HtmlEscape(text.y_label));
  }

  double Y(double value) const {
    const double lo = y_ticks_.front(), hi = y_ticks_.back();
    return bottom_ - (value - lo) / (hi - lo) * (bottom_ - kTop);
  }
  double bottom() const { return bottom_; }
  void Add(const std::string& element) { svg_ += element; }

  std::string Finish(const std::vector<LegendEntry>& legend) {
    for (size_t i = 0; i < legend.size(); ++i) {
      const double y = kTop + 18.0 * i;
      svg_ += fmt::format("<g class=\"legend\"><rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"{2}\"/>"
                          "<text x=\"{3}\" y=\"{4}\">{5}<title>{6}</title></text></g>\n",
                          kRight + 16, y, legend[i].color, kRight + 34, y + 10,
                          HtmlEscape(Truncate(legend[i].name, kMaxLegendChars)), HtmlEscape(legend[i].name));
    }
    return svg_ + "</svg>\n";
  }

 private:
  double bottom_;
  std::vector<double> y_ticks_;
  std::string svg_;
};

struct LineSeries {
  std::string name, color;
  Points points;  // non-empty
};

std::string LineChart(const ChartText& text, const std::vector<LineSeries>& series, bool markers) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x), y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  }
  // A little room above and below, so that the highest and lowest points are not drawn on the frame.
  const double y_pad = (y_hi - y_lo) * 0.05;
  Frame frame(text, 270, 44, y_lo - y_pad, y_hi + y_pad);
  // x counts steps or epochs: a tick at 2.5 epochs would label a point that cannot exist.
  const std::vector<double> x_ticks = NiceTicks(x_lo, x_hi, /*min_step=*/1);
  const double x_min = x_ticks.front(), x_max = x_ticks.back();
  auto x_of = [&](double x) { return Frame::kLeft + (x - x_min) / (x_max - x_min) * (Frame::kRight - Frame::kLeft); };
  const double step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1;
  for (double t : x_ticks) {
    frame.Add(fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(t),
                          frame.bottom() + 16, TickLabel(t, step)));
  }
  std::vector<LegendEntry> legend;
  for (const auto& s : series) {
    std::string points;
    for (const auto& [x, y] : s.points) points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x_of(x), frame.Y(y));
    frame.Add(fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" points=\"{}\"><title>{}</title></polyline>\n",
                          s.color, points, HtmlEscape(s.name)));
    if (markers) {
      for (const auto& [x, y] : s.points) {
        frame.Add(fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {:g}</title></circle>\n",
                              x_of(x), frame.Y(y), s.color, HtmlEscape(s.name), y));
      }
    }
    legend.push_back({s.name, s.color});
  }
  return frame.Finish(legend);
}

struct BarSeries {
  std::string name, color;
  std::vector<double> values;  // one per category; NaN draws no bar
};

// Grouped bars (series side by side in each category) or stacked bars (series on top of each
// other). With `category_colors`, a single series takes each category's colour (one bar per run).
std::string BarChart(const ChartText& text, const std::vector<std::string>& categories, const std::vector<BarSeries>& series,
                     bool stacked, const std::vector<std::string>& category_colors = {}) {
  double y_hi = 0;
  for (size_t c = 0; c < categories.size(); ++c) {
    double total = 0;
    for (const auto& s : series) {
      const double v = std::isnan(s.values[c]) ? 0 : s.values[c];
      total = stacked ? total + v : std::max(total, v);
    }
    y_hi = std::max(y_hi, total);
  }
  // Category labels are drawn rotated under the bars; the axis title goes below the longest.
  size_t longest = 0;
  for (const auto& c : categories) longest = std::max(longest, Truncate(c).size());
  const double label_depth = kLabelCharWidth * longest * std::sin(kLabelAngle) + kLabelHeight;
  Frame frame(text, 290, 12 + label_depth + 22, 0, y_hi);
  const double band = (Frame::kRight - Frame::kLeft) / categories.size();
  const double bar_width = stacked ? band * 0.6 : band * 0.8 / series.size();
  for (size_t c = 0; c < categories.size(); ++c) {
    const double band_left = Frame::kLeft + band * c;
    double base = 0;
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = series[s].values[c];
      if (std::isnan(v)) continue;
      const double x = stacked ? band_left + band * 0.2 : band_left + band * 0.1 + bar_width * s;
      const double top = frame.Y(base + v), height = frame.Y(base) - top;
      const std::string& color = category_colors.empty() ? series[s].color : category_colors[c];
      frame.Add(fmt::format("<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
                            "<title>{} / {}: {:.4g}</title></rect>\n",
                            x, top, bar_width, height, color, HtmlEscape(categories[c]), HtmlEscape(series[s].name), v));
      if (stacked) base += v;
    }
    frame.Add(fmt::format("<text class=\"tick\" transform=\"translate({:.1f} {}) rotate({:.0f})\" text-anchor=\"end\">{}"
                          "<title>{}</title></text>\n",
                          band_left + band / 2, frame.bottom() + 12, -kLabelAngle * 180 / M_PI, HtmlEscape(Truncate(categories[c])),
                          HtmlEscape(categories[c])));
  }
  std::vector<LegendEntry> legend;
  if (category_colors.empty()) {
    for (const auto& s : series) legend.push_back({s.name, s.color});
  } else {
    for (size_t c = 0; c < categories.size(); ++c) legend.push_back({categories[c], category_colors[c]});
  }
  return frame.Finish(legend);
}

// One chart section: the chart (or a note that no run has data for it) and a caption naming the
// runs left out.
std::string Section(const std::string& id, const std::string& heading, const std::string& svg,
                    const std::vector<std::string>& left_out, const std::string& note) {
  std::string html = fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n<figure>\n", id, HtmlEscape(heading));
  html += svg.empty() ? "<p class=\"empty\">No run has data for this chart.</p>\n" : svg;
  std::string caption = note;
  if (!left_out.empty()) {
    std::string names;
    for (const auto& n : left_out) names += (names.empty() ? "" : ", ") + HtmlEscape(n);
    caption += (caption.empty() ? "" : " ") + std::string("Not shown (no data): ") + names + ".";
  }
  if (!caption.empty()) html += "<figcaption>" + caption + "</figcaption>\n";
  return html + "</figure>\n</section>\n";
}

std::string LineSection(const std::string& id, const ChartText& text, const std::vector<RunData>& runs,
                        Points RunData::*curve, bool markers, const std::string& note) {
  std::vector<LineSeries> series;
  std::vector<std::string> left_out;
  for (const auto& run : runs) {
    if ((run.*curve).empty()) left_out.push_back(run.name);
    else series.push_back({run.name, run.color, run.*curve});
  }
  return Section(id, text.title, series.empty() ? "" : LineChart(text, series, markers), left_out, note);
}

// A bar per run of one value, coloured like the run's curves.
std::string RunBarSection(const std::string& id, const ChartText& text, const std::vector<RunData>& runs,
                          double RunData::*value, const std::string& note) {
  std::vector<std::string> names, colors, left_out;
  BarSeries bars{text.y_label, "", {}};
  for (const auto& run : runs) {
    if (std::isnan(run.*value)) {
      left_out.push_back(run.name);
      continue;
    }
    names.push_back(run.name);
    colors.push_back(run.color);
    bars.values.push_back(run.*value);
  }
  return Section(id, text.title, names.empty() ? "" : BarChart(text, names, {bars}, false, colors), left_out, note);
}

std::string TimeSection(const std::vector<RunData>& runs) {
  std::vector<std::string> names, left_out;
  std::vector<BarSeries> phases = {{"data wait", "#e15759", {}}, {"compute", "#4e79a7", {}}, {"communication", "#edc948", {}}};
  for (const auto& run : runs) {
    if (std::isnan(run.compute_seconds)) {
      left_out.push_back(run.name);
      continue;
    }
    names.push_back(run.name);
    phases[0].values.push_back(run.data_wait_seconds);
    phases[1].values.push_back(run.compute_seconds);
    phases[2].values.push_back(run.comm_seconds);
  }
  const ChartText text{"Training time: data wait vs compute", "run", "seconds (sum over epochs)"};
  return Section("time", text.title, names.empty() ? "" : BarChart(text, names, phases, true), left_out,
                 "Time spent waiting for the data loader, computing, and communicating between ranks.");
}

std::string PerClassSection(const std::vector<ComparisonRow>& rows, const std::vector<RunData>& runs) {
  size_t classes = 0;
  std::vector<std::string> class_names;
  for (size_t i = 0; i < runs.size(); ++i) {
    classes = std::max(classes, runs[i].per_class.size());
    const std::optional<RunSummary>& s = rows[i].summary;
    if (class_names.empty() && s && s->class_names) class_names = *s->class_names;
  }
  std::vector<std::string> categories;
  for (size_t c = 0; c < classes; ++c) categories.push_back(c < class_names.size() ? class_names[c] : std::to_string(c));
  std::vector<BarSeries> series;
  std::vector<std::string> left_out;
  for (const auto& run : runs) {
    if (run.per_class.empty()) {
      left_out.push_back(run.name);
      continue;
    }
    BarSeries s{run.name, run.color, run.per_class};
    s.values.resize(classes, kNaN);
    series.push_back(std::move(s));
  }
  const ChartText text{"Per-class test accuracy", "class", "accuracy %"};
  return Section("per-class", text.title, series.empty() ? "" : BarChart(text, categories, series, false), left_out, "");
}

std::string Cell(const ComparisonRow& row, std::string RunSummary::*field) {
  return row.summary && !((*row.summary).*field).empty() ? HtmlEscape((*row.summary).*field) : "-";
}

std::string Cell(const ComparisonRow& row, int64_t RunSummary::*field) {
  return row.summary ? std::to_string((*row.summary).*field) : "-";
}

std::string Number(double value, int digits) { return std::isnan(value) ? "-" : fmt::format("{:.{}f}", value, digits); }

std::string ResultsTable(const std::vector<ComparisonRow>& rows, const std::vector<RunData>& runs) {
  std::string html =
      "<section id=\"results\">\n<h2>Results</h2>\n<table>\n<thead><tr><th>run</th><th>mode</th><th>precision</th>"
      "<th>workers</th><th>batch</th><th>status</th><th>accuracy %</th><th>time s</th><th>img/s</th>"
      "<th>peak MiB</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ComparisonRow& row = rows[i];
    const bool failed = RunFailed(row);
    const double accuracy = row.summary ? row.summary->test_accuracy.value_or(kNaN) : kNaN;
    // A failed run's time and throughput mean nothing (it stopped early, or never started).
    const double seconds = !failed ? row.summary->total_seconds.value_or(kNaN) : kNaN;
    html += fmt::format(
        "<tr class=\"{}\"><td><span class=\"swatch\" style=\"background:{}\"></span>{}<div class=\"folder\">{}</div></td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        failed ? "failed" : "ok", runs[i].color, HtmlEscape(row.name), HtmlEscape(row.folder), Cell(row, &RunSummary::mode),
        Cell(row, &RunSummary::precision), Cell(row, &RunSummary::num_workers), Cell(row, &RunSummary::batch_size),
        failed ? "failed: <span class=\"error\">" + HtmlEscape(RunError(row)) + "</span>" : std::string("ok"),
        Number(accuracy, 2), Number(seconds, 1), Number(failed ? kNaN : runs[i].images_per_second, 0),
        Number(runs[i].peak_mib, 0));
  }
  return html + "</tbody>\n</table>\n<p class=\"note\">time s: whole run including start-up and evaluation; img/s: "
                "mean training throughput over epochs; peak MiB: largest peak device memory over the ranks.</p>\n"
                "</section>\n";
}

// svg overflow: the first category's rotated label may reach left of the chart's box.
constexpr const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:2em auto;max-width:980px;color:#222}
h1{margin-bottom:.2em}table{border-collapse:collapse;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}
th:first-child,td:first-child,th:nth-child(6),td:nth-child(6){text-align:left}td:nth-child(6){max-width:22em}
tr.failed{background:#fdecea}.error{color:#b3261e}.folder{color:#777;font-size:11px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:6px}
figure{margin:0}figcaption,.note,.empty{color:#555;font-size:13px}
svg{overflow:visible}svg text{font-size:12px;fill:#333}svg .title{font-size:15px;font-weight:600}
svg .grid{stroke:#e5e5e5}svg .axis{stroke:#333}svg .series{stroke-width:2}
)";

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&#39;"; break;
      default: escaped.push_back(c);
    }
  }
  return escaped;
}

std::string ReportHtml(const ComparePlan& plan, const std::vector<ComparisonRow>& rows) {
  std::vector<RunData> runs;
  for (size_t i = 0; i < rows.size(); ++i) runs.push_back(Extract(rows[i], i));
  std::string html = fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                                 "<title>{0}</title>\n<style>\n{1}</style>\n</head>\n<body>\n<h1>{0}</h1>\n",
                                 HtmlEscape(plan.name), kStyle);
  if (!plan.description.empty()) html += "<p>" + HtmlEscape(plan.description) + "</p>\n";
  if (!QuickRunNote(plan).empty()) html += "<p class=\"note\">" + HtmlEscape(QuickRunNote(plan)) + "</p>\n";
  html += ResultsTable(rows, runs);
  html += LineSection("loss", {"Training loss", "step", "loss"}, runs, &RunData::loss, false,
                      "Per logged step, from each run's metrics.csv.");
  html += LineSection("accuracy", {"Test accuracy per epoch", "epoch", "accuracy %"}, runs, &RunData::accuracy, true, "");
  html += RunBarSection("throughput", {"Training throughput", "run", "images/s"}, runs, &RunData::images_per_second,
                        "Mean over epochs.");
  html += RunBarSection("memory", {"Peak device memory", "run", "MiB"}, runs, &RunData::peak_mib,
                        "Largest peak over the ranks.");
  html += TimeSection(runs);
  html += PerClassSection(rows, runs);
  return html + "</body>\n</html>\n";
}

}  // namespace mgpu
