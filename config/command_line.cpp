#include "config/command_line.h"

#include <algorithm>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "config/model_names.h"

namespace mgpu {
namespace {

// "unknown flag --modle (did you mean --model?)", for the first unknown flag, or the stray value.
std::string UnexpectedArgumentsMessage(const std::vector<std::string>& extras) {
  for (const std::string& argument : extras) {
    const std::string flag = argument.substr(0, argument.find('='));
    const size_t name_start = flag.find_first_not_of('-');
    if (name_start == 0 || name_start == std::string::npos) continue;
    const std::string closest = ClosestOptionName(flag.substr(name_start));
    const std::string hint = ForeignOptionHint(flag.substr(name_start));
    return fmt::format("unknown flag {}{}; {}", flag, closest.empty() ? "" : fmt::format(" (did you mean --{}?)", closest),
                       hint.empty() ? "run `mgpu-worker --help` for the options" : hint + "; drop " + flag);
  }
  return fmt::format("unexpected argument '{}': every value follows its flag (--name value); run "
                     "`mgpu-worker --help` for the options", extras.front());
}

// `--` ends the options; what follows would be positional arguments, which mgpu-worker has none
// of (CLI11 would pass them on as unknown, and they would be named as misspelt flags).
void RefuseArgumentsAfterDoubleDash(const std::vector<std::string>& args) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes == args.end() || dashes + 1 == args.end()) return;
  throw BadInputError(fmt::format("'{}' follows `--`, after which arguments are not options, and mgpu-worker takes "
                                  "no other arguments; remove the `--` (every value follows its flag: --name value)",
                                  *(dashes + 1)));
}

// The value's type in --help ("INT", "NUMBER", "BOOL", "CHOICE", "PATH", "TEXT").
std::string HelpTypeName(const OptionSpec& spec) {
  if (spec.choices == std::vector<std::string>{"true", "false"}) return "BOOL";
  if (!spec.choices.empty()) return "CHOICE";
  if (spec.value_type == "an integer") return "INT";
  if (spec.value_type == "a number") return "NUMBER";
  if (spec.value_type != OptionSpec{}.value_type) return "LIST";
  if (spec.path_use != PathUse::kNone) return "PATH";
  return "TEXT";
}

}  // namespace

std::optional<TrainConfig> ParseWorkerCommandLine(const std::vector<std::string>& args, int& exit_code) {
  CLI::App app{"mgpu-worker: one training process of an mgpu job.\n"
               "Options can also be set in a YAML file given by --config; flags win."};
  app.name("mgpu-worker");
  app.get_formatter()->column_width(32);
  std::string config_file;
  app.add_option("--config", config_file, "YAML file of options (keys as the flags, without --)");
  const auto& specs = TrainOptions();
  std::vector<std::string> values(specs.size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string names = "--" + specs[i].name;
    for (const auto& alias : specs[i].aliases) names += ",--" + alias;
    std::string help = specs[i].help;
    if (!specs[i].choices.empty()) help += fmt::format(" ({})", fmt::join(specs[i].choices, " | "));
    help += fmt::format(" [{}]", specs[i].get(TrainConfig{}));
    // A repeated flag takes its last value, as with argparse.
    options.push_back(app.add_option(names, values[i], help)
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                          ->type_name(HelpTypeName(specs[i]))
                          ->group(specs[i].section));
    // Switches work as plain flags too (`--amp` means `--amp true`).
    if (!specs[i].flag_value.empty()) options.back()->expected(0, 1);
  }
  // Unknown arguments are collected rather than refused by CLI11, to name the flag meant.
  app.allow_extras();
  RefuseArgumentsAfterDoubleDash(args);
  try {
    // CLI11 takes the arguments in reverse order.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    exit_code = app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw BadInputError(fmt::format("{}; run `mgpu-worker --help` for the options", e.what()));
  }
  if (const std::vector<std::string> extras = app.remaining(); !extras.empty()) {
    throw BadInputError(UnexpectedArgumentsMessage(extras));
  }

  TrainConfig config;
  if (!config_file.empty()) {
    ApplyYamlFile(config, config_file);
    config.config_file = config_file;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (options[i]->count() == 0) continue;
    try {
      specs[i].set(config, values[i].empty() && options[i]->get_expected_min() == 0 ? specs[i].flag_value : values[i]);
    } catch (const BadInputError& e) {
      throw BadInputError(fmt::format("--{}: {}", specs[i].name, e.what()));
    }
  }
  ResolveSeedSpellings(config);
  ValidateConfig(config);
  return config;
}

std::string DefaultOutputFolder(const TrainConfig& config) {
  const std::string base = fmt::format("runs/{}-{}-{}-{}", TimestampForPath(), ModelLabel(config.model),
                                       config.dataset, config.mode);
  std::string folder = base;
  for (int i = 2; PathExists(folder); ++i) folder = fmt::format("{}-{}", base, i);
  return folder;
}

}  // namespace mgpu
