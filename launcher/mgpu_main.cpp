// mgpu: the launcher, service and report tool.
//   mgpu run [launcher flags] [worker flags...]  one job of supervised workers (launcher/run/run_job.h)
//   mgpu compare CONFIG [--quick] [--out DIR]   runs a matrix of trainings, reports them side by side
//   mgpu demo [--quick] [--out DIR]             the embedded default comparison (configs/demo.yaml)
//   mgpu serve [--listen ADDR] [--gpus LIST] [--state-dir DIR]   the training service
//     (launcher/serve/serve_command.h), and its clients mgpu submit | status | watch | cancel | logs
//     (launcher/serve/client_commands.h)
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "launcher/compare/compare.h"
#include "launcher/compare/compare_plan.h"
#include "launcher/embedded_demo.h"
#include "launcher/run/run_job.h"
#include "launcher/run/run_options.h"
#include "launcher/serve/client_commands.h"
#include "launcher/serve/serve_command.h"

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
    if (!options->layout_source.empty()) {  // Kubeflow's or Slurm's environment placed this node
      const std::string port = options->master_port > 0 ? std::to_string(options->master_port) : "(free port)";
      std::fprintf(stderr, "mgpu run: node %d of %d, %s worker(s) per node, master %s:%s (layout from %s)\n",
                   options->node_rank, options->nnodes, options->nproc_per_node.c_str(),
                   options->master_addr.c_str(), port.c_str(), options->layout_source.c_str());
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
  if (argc >= 2) {
    const std::string command = argv[1];
    const std::vector<std::string> rest(argv + 2, argv + argc);
    if (command == "run") return RunMain(rest);
    if (command == "serve") return ServeMain(rest);
    for (const auto& [name, help] : ClientCommands()) {
      if (command == name) return ClientMain(command, rest);
    }
  }
  CLI::App app{"mgpu: multi-GPU training in C++: run and compare trainings, or serve a queue of jobs"};
  app.require_subcommand(1);
  // Listed for --help only: main() hands these to their own parsers before CLI11 sees them.
  app.add_subcommand("run", "one job: spawn and supervise workers (mgpu run --help)");
  app.add_subcommand("serve", "own this host's devices and run submitted jobs in order (mgpu serve --help)");
  for (const auto& [name, help] : ClientCommands()) app.add_subcommand(name, help);

  std::string compare_file, compare_out, demo_out;
  bool compare_quick = false, demo_quick = false;
  int compare_repeat = 1;
  CLI::App* compare = app.add_subcommand("compare", "run a matrix of trainings and report them side by side");
  compare->add_option("config", compare_file, "comparison YAML (see configs/)")->required();
  compare->add_flag("--quick", compare_quick, "apply the file's 'quick' overrides (a smoke run)");
  compare->add_option("--out", compare_out, "output folder (default runs/<timestamp>-compare-<name>)");
  compare->add_option("--repeat", compare_repeat,
                      "run every row N times, round the plan: the report gives the median img/s, the spread, "
                      "and flags a repeat more than 25% from the median")
      ->check(CLI::Range(1, 100))
      ->default_val(1);
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
    return RunComparison(plan, text, out, *compare ? compare_repeat : 1);
  } catch (...) {
    const Status status = StatusFromCurrentException();
    std::fprintf(stderr, "mgpu: %s\n", status.ToString().c_str());
    return status.exit_code();
  }
}
