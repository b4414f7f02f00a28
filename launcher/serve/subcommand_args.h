// Parsing one `mgpu` subcommand's arguments with CLI11, the same way for every subcommand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace mgpu {

// Parses `args` (what follows the subcommand's name) into `app`. Returns the exit code the
// command ends with when parsing ends it — 0 after --help, 2 (bad input) after an error, both
// printed by CLI11 — or nullopt to go on.
std::optional<int> ParseSubcommandArgs(CLI::App& app, const std::vector<std::string>& args);

}  // namespace mgpu
