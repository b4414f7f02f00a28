#include "launcher/compare/compare_plan.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "config/train_config.h"

namespace mgpu {
namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

void SetOption(Options& options, const std::string& key, const std::string& value) {
  for (auto& entry : options) {
    if (entry.first == key) {
      entry.second = value;
      return;
    }
  }
  options.emplace_back(key, value);
}

// Checks `key` names a worker option and `value` is acceptable for it; returns the canonical key.
std::string CheckedOption(const std::string& origin, const YAML::Node& key_node, const YAML::Node& value,
                          const std::string& section) {
  const std::string key = key_node.as<std::string>();
  const int line = key_node.Mark().line + 1;
  const OptionSpec* spec = FindTrainOption(key);
  if (spec == nullptr) {
    throw BadInputError(fmt::format("{}:{}: unknown option '{}' in {}; options are those of "
                                    "`mgpu-worker --help`",
                                    origin, line, key, section));
  }
  if (spec->name == "out") {
    throw BadInputError(fmt::format("{}:{}: 'out' cannot be set per run; `mgpu compare --out DIR` "
                                    "places each run in DIR/<run name>", origin, line));
  }
  if (!value.IsScalar()) {
    throw BadInputError(fmt::format("{}:{}: option '{}' in {} needs a single value", origin, line, key, section));
  }
  TrainConfig probe;
  try {
    spec->set(probe, value.Scalar());
  } catch (const BadInputError& e) {
    throw BadInputError(fmt::format("{}:{}: option '{}' in {}: {}", origin, line, key, section, e.what()));
  }
  return spec->name;
}

Options ReadOptionMap(const std::string& origin, const YAML::Node& node, const std::string& section) {
  Options options;
  if (!node) return options;
  if (!node.IsMap()) {
    throw BadInputError(fmt::format("{}:{}: '{}' must be a mapping of worker options", origin,
                                    node.Mark().line + 1, section));
  }
  for (const auto& entry : node) {
    SetOption(options, CheckedOption(origin, entry.first, entry.second, section), entry.second.Scalar());
  }
  return options;
}

}  // namespace

std::string QuickRunNote(const ComparePlan& plan) {
  if (plan.quick_overrides.empty()) return "";
  std::vector<std::string> settings;
  for (const auto& [key, value] : plan.quick_overrides) settings.push_back(key + "=" + value);
  return fmt::format("Quick run (--quick): {} on every run; the description is of the full runs.",
                     fmt::join(settings, ", "));
}

ComparePlan ParseComparePlan(const std::string& yaml_text, const std::string& origin, bool quick) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw BadInputError(fmt::format("{}:{}:{}: not valid YAML: {}", origin, e.mark.line + 1,
                                    e.mark.column + 1, e.msg));
  }
  if (!root.IsMap()) throw BadInputError(origin + ": expected a mapping with 'base' and 'runs' or 'matrix'");
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    if (key != "name" && key != "description" && key != "base" && key != "quick" && key != "matrix" &&
        key != "runs") {
      throw BadInputError(fmt::format("{}:{}: unknown section '{}'; expected name, description, "
                                      "base, quick, matrix or runs",
                                      origin, entry.first.Mark().line + 1, key));
    }
  }
  ComparePlan plan;
  plan.name = root["name"] ? root["name"].as<std::string>() : "comparison";
  plan.description = root["description"] ? root["description"].as<std::string>() : "";
  Options base = ReadOptionMap(origin, root["base"], "base");
  if (quick) {
    plan.quick_overrides = ReadOptionMap(origin, root["quick"], "quick");
    for (const auto& [key, value] : plan.quick_overrides) SetOption(base, key, value);
  }

  // The matrix: every combination, named "key=value,key=value".
  std::vector<PlannedRun> combos = {PlannedRun{"", {}}};
  if (const YAML::Node matrix = root["matrix"]) {
    if (!matrix.IsMap()) throw BadInputError(origin + ": 'matrix' must map options to lists of values");
    for (const auto& axis : matrix) {
      if (!axis.second.IsSequence() || axis.second.size() == 0) {
        throw BadInputError(fmt::format("{}:{}: matrix axis '{}' needs a non-empty list of values",
                                        origin, axis.first.Mark().line + 1, axis.first.as<std::string>()));
      }
      std::vector<PlannedRun> next;
      for (const auto& combo : combos) {
        for (const auto& value : axis.second) {
          PlannedRun run = combo;
          const std::string key = CheckedOption(origin, axis.first, value, "matrix");
          SetOption(run.options, key, value.Scalar());
          run.name += (run.name.empty() ? "" : ",") + key + "=" + value.Scalar();
          next.push_back(run);
        }
      }
      combos = std::move(next);
    }
  }

  std::vector<PlannedRun> explicit_runs;
  if (const YAML::Node runs = root["runs"]) {
    if (!runs.IsSequence()) throw BadInputError(origin + ": 'runs' must be a list of mappings");
    for (const auto& entry : runs) {
      if (!entry.IsMap() || !entry["name"]) {
        throw BadInputError(fmt::format("{}:{}: every entry of 'runs' needs a 'name'", origin,
                                        entry.Mark().line + 1));
      }
      PlannedRun run{entry["name"].as<std::string>(), {}};
      for (const auto& option : entry) {
        if (option.first.as<std::string>() == "name") continue;
        SetOption(run.options, CheckedOption(origin, option.first, option.second, "runs"), option.second.Scalar());
      }
      explicit_runs.push_back(run);
    }
  }
  if (explicit_runs.empty() && !root["matrix"]) {
    throw BadInputError(origin + ": nothing to compare; add 'runs' or 'matrix'");
  }
  if (explicit_runs.empty()) explicit_runs.push_back(PlannedRun{"", {}});

  // Every explicit run × every matrix combination, over the base options.
  for (const auto& run : explicit_runs) {
    for (const auto& combo : combos) {
      PlannedRun planned{run.name, base};
      for (const auto& [key, value] : run.options) SetOption(planned.options, key, value);
      for (const auto& [key, value] : combo.options) SetOption(planned.options, key, value);
      if (!combo.name.empty()) planned.name += (planned.name.empty() ? "" : "/") + combo.name;
      for (const auto& existing : plan.runs) {
        if (existing.name == planned.name) {
          throw BadInputError(fmt::format("{}: two runs are named '{}'; names must be unique", origin, planned.name));
        }
      }
      plan.runs.push_back(std::move(planned));
    }
  }
  return plan;
}

}  // namespace mgpu
