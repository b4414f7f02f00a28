#include "launcher/compare.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "common/files.h"
#include "launcher/child_process.h"
#include "launcher/comparison_report.h"

namespace mgpu {
namespace {

std::string FolderName(const std::string& run_name) {
  std::string folder;
  for (char c : run_name) folder.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_');
  return folder;
}

}  // namespace

int RunComparison(const ComparePlan& plan, const std::string& plan_text, const std::string& out) {
  MakeDirectories(out);
  WriteFileAtomically(out + "/compare.yaml", plan_text);
  const std::string worker = WorkerExecutable();
  std::vector<ComparisonRow> rows;
  int failures = 0;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    ComparisonRow row;
    row.name = run.name;
    row.folder = out + "/" + FolderName(run.name);
    // A DDP row needs a process per device: `mgpu run` (this program) starts and supervises them,
    // one per visible GPU, or 2 on a CPU-only machine; every other row is one mgpu-worker.
    const bool ddp = std::any_of(run.options.begin(), run.options.end(),
                                 [](const auto& option) { return option.first == "mode" && option.second == "ddp"; });
    std::vector<std::string> argv =
        ddp ? std::vector<std::string>{LauncherExecutable(), "run", "--nproc-per-node", "auto"}
            : std::vector<std::string>{worker};
    for (const auto& [key, value] : run.options) {
      argv.push_back("--" + key);
      argv.push_back(value);
    }
    argv.insert(argv.end(), {"--out", row.folder, "--name", run.name});
    std::fprintf(stderr, "\n=== run %zu/%zu: %s\n$ %s\n", i + 1, plan.runs.size(), run.name.c_str(),
                 fmt::format("{}", fmt::join(argv, " ")).c_str());
    RemovePath(row.folder + "/summary.json");  // never report a stale result
    row.exit_code = RunAndWait(argv);
    try {
      row.summary = nlohmann::json::parse(ReadFile(row.folder + "/summary.json"));
    } catch (const std::exception&) {
      row.summary = nullptr;
    }
    if (row.exit_code != 0) ++failures;
    rows.push_back(std::move(row));
    WriteComparison(out, plan, rows);
  }
  std::fprintf(stdout, "\n%s\n%s", plan.name.c_str(), ComparisonTable(rows).c_str());
  std::fprintf(stdout, "\nreport: %s/report.html (also report.md; tables: comparison.csv, comparison.json)\n",
               out.c_str());
  if (failures > 0) std::fprintf(stderr, "mgpu compare: %d of %zu runs failed; see their rows\n", failures, rows.size());
  return failures > 0 ? 1 : 0;
}

}  // namespace mgpu
