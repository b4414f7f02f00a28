#include "launcher/compare/compare.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/files.h"
#include "common/stop_signal.h"
#include "launcher/child_process.h"
#include "launcher/compare/comparison_report.h"

namespace mgpu {
namespace {

std::string FolderName(const std::string& run_name) {
  std::string folder;
  for (char c : run_name) folder.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_');
  return folder;
}

// The command line of one execution of `run`, writing into `folder`.
std::vector<std::string> RunArgv(const PlannedRun& run, const std::string& folder) {
  // A DDP row needs a process per device: `mgpu run` (this program) starts and supervises them,
  // one per visible GPU, or 2 on a CPU-only machine; every other row is one mgpu-worker.
  const bool ddp = std::any_of(run.options.begin(), run.options.end(),
                               [](const auto& option) { return option.first == "mode" && option.second == "ddp"; });
  std::vector<std::string> argv =
      ddp ? std::vector<std::string>{LauncherExecutable(), "run", "--nproc-per-node", "auto"}
          : std::vector<std::string>{WorkerExecutable()};
  for (const auto& [key, value] : run.options) {
    argv.push_back("--" + key);
    argv.push_back(value);
  }
  // The comparison owns its rows' folders: a rerun of the plan into the same --out replaces them.
  argv.insert(argv.end(), {"--out", folder, "--name", run.name, "--overwrite"});
  return argv;
}

RunSample Execute(const std::vector<std::string>& argv, const std::string& folder) {
  RunSample sample;
  sample.folder = folder;
  RemovePath(folder + "/summary.json");  // never report a stale result
  sample.exit_code = RunAndWait(argv);
  try {
    sample.summary = SummaryOf(nlohmann::json::parse(ReadFile(folder + "/summary.json")));
  } catch (const std::exception&) {
    sample.summary = std::nullopt;
  }
  return sample;
}

// The rows that have run at least once, in plan order.
std::vector<ComparisonRow> RowsSoFar(const std::vector<ComparisonRow>& rows) {
  std::vector<ComparisonRow> done;
  for (const auto& row : rows) {
    if (!row.samples.empty()) done.push_back(row);
  }
  return done;
}

}  // namespace

int RunComparison(const ComparePlan& plan, const std::string& plan_text, const std::string& out, int repeat) {
  // A stop signal ends the comparison after the running row, which stops at a step boundary with
  // its checkpoint (RunAndWait passes the signal on); the report keeps every row that ran.
  InstallStopSignalHandlers();
  MakeDirectories(out);
  WriteFileAtomically(out + "/compare.yaml", plan_text);
  std::vector<ComparisonRow> rows(plan.runs.size());
  for (size_t i = 0; i < plan.runs.size(); ++i) rows[i].name = plan.runs[i].name;
  // Repeats go round the plan rather than run back to back, so that a slow spell of the machine
  // lands on several rows once each instead of on every repeat of one row.
  const size_t total = plan.runs.size() * static_cast<size_t>(repeat);
  size_t done = 0;
  for (int r = 0; r < repeat && ReceivedStopSignal() == 0; ++r) {
    for (size_t i = 0; i < plan.runs.size() && ReceivedStopSignal() == 0; ++i) {
      const PlannedRun& run = plan.runs[i];
      const std::string folder = out + "/" + FolderName(run.name) +
                                 (repeat > 1 ? fmt::format("/repeat-{}", r + 1) : std::string());
      const std::vector<std::string> argv = RunArgv(run, folder);
      std::fprintf(stderr, "\n=== run %zu/%zu: %s%s\n$ %s\n", ++done, total, run.name.c_str(),
                   repeat > 1 ? fmt::format(" (repeat {}/{})", r + 1, repeat).c_str() : "",
                   fmt::format("{}", fmt::join(argv, " ")).c_str());
      AddSample(rows[i], Execute(argv, folder));
      WriteComparison(out, plan, RowsSoFar(rows));
    }
  }
  const std::vector<ComparisonRow> ran = RowsSoFar(rows);
  const int failures = static_cast<int>(std::count_if(ran.begin(), ran.end(), RunFailed));
  std::fprintf(stdout, "\n%s\n%s", plan.name.c_str(), ComparisonTable(ran).c_str());
  std::fprintf(stdout, "\nreport: %s/report.html (also report.md; tables: comparison.csv, comparison.json)\n",
               out.c_str());
  if (const int signal = ReceivedStopSignal(); signal != 0) {
    std::fprintf(stderr, "mgpu compare: stopped by %s after %zu of %zu runs; the report holds those; run the plan "
                 "again to complete it\n", SignalName(signal).c_str(), done, total);
    return 128 + signal;
  }
  if (failures > 0) std::fprintf(stderr, "mgpu compare: %d of %zu runs failed; see their rows\n", failures, ran.size());
  return failures > 0 ? 1 : 0;
}

}  // namespace mgpu
