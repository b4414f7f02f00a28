#include "launcher/serve/subcommand_args.h"

#include "common/status.h"

namespace mgpu {

std::optional<int> ParseSubcommandArgs(CLI::App& app, const std::vector<std::string>& args) {
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const int printed = app.exit(e);
    return e.get_exit_code() == 0 ? printed : static_cast<int>(ExitCode::kBadInput);
  }
  return std::nullopt;
}

}  // namespace mgpu
