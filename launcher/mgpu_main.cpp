// mgpu: the launcher and report tool.
//   mgpu run [launcher flags] [worker flags...]  one job of supervised workers (launcher/run_job.h)
//   mgpu compare CONFIG [--quick] [--out DIR]   runs a matrix of trainings, reports them side by side
//   mgpu demo [--quick] [--out DIR]             the embedded default comparison (configs/demo.yaml)
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "launcher/compare.h"
#include "launcher/compare_plan.h"
#include "launcher/embedded_demo.h"
#include "launcher/run_job.h"
#include "launcher/run_options.h"

namespace {

// `mgpu run` parses its own flags: every flag it does not know goes to the workers.
int RunMain(const std::vector<std::string>& args) {
  using namespace mgpu;
  try {
    const std::optional<RunOptions> options = ParseRunOptions(args, ProcessEnvironment());
    if (!options) {
      std::printf("%s", RunUsage().c_str());
      return 0;
    }
    return RunJob(*options);
  } catch (...) {
    const Status status = StatusFromCurrentException();
    std::fprintf(stderr, "mgpu run: %s\n", status.ToString().c_str());
    return status.exit_code();
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mgpu;
  if (argc >= 2 && std::string(argv[1]) == "run") return RunMain(std::vector<std::string>(argv + 2, argv + argc));
  CLI::App app{"mgpu: multi-GPU training in C++: run and compare trainings"};
  app.require_subcommand(1);
  // Listed for --help only: main() hands `run` to RunMain before CLI11 sees it.
  app.add_subcommand("run", "one job: spawn and supervise workers (mgpu run --help)");

  std::string compare_file, compare_out, demo_out;
  bool compare_quick = false, demo_quick = false;
  CLI::App* compare = app.add_subcommand("compare", "run a matrix of trainings and report them side by side");
  compare->add_option("config", compare_file, "comparison YAML (see configs/)")->required();
  compare->add_flag("--quick", compare_quick, "apply the file's 'quick' overrides (a smoke run)");
  compare->add_option("--out", compare_out, "output folder (default runs/<timestamp>-compare-<name>)");
  CLI::App* demo = app.add_subcommand("demo", "the embedded default comparison: LeNet on Fashion-MNIST");
  demo->add_flag("--quick", demo_quick, "a shorter smoke run");
  demo->add_option("--out", demo_out, "output folder (default runs/<timestamp>-demo)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), static_cast<int>(ExitCode::kBadInput));
  }

  try {
    std::string text, origin, out;
    bool quick = false;
    if (*compare) {
      text = ReadFile(compare_file);
      origin = compare_file;
      quick = compare_quick;
      out = compare_out;
    } else {
      text = kEmbeddedDemoYaml;
      origin = "configs/demo.yaml (embedded)";
      quick = demo_quick;
      out = demo_out;
    }
    const ComparePlan plan = ParseComparePlan(text, origin, quick);
    if (out.empty()) out = fmt::format("runs/{}-compare-{}", TimestampForPath(), plan.name);
    return RunComparison(plan, text, out);
  } catch (...) {
    const Status status = StatusFromCurrentException();
    std::fprintf(stderr, "mgpu: %s\n", status.ToString().c_str());
    return status.exit_code();
  }
}
