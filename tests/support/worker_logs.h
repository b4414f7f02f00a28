// What a worker's log (logs/rank-K.log) says about the process, for tests that signal or kill it.
#pragma once

#include <sys/types.h>

#include <regex>
#include <string>

#include "common/files.h"

namespace mgpu::testing {

// The pid a worker logged at start ("mgpu-worker started (pid N)"), or -1 before it has (or when
// the log does not exist yet).
inline pid_t LoggedPid(const std::string& log) {
  std::smatch match;
  const std::string text = PathExists(log) ? ReadFile(log) : "";
  if (!std::regex_search(text, match, std::regex(R"(mgpu-worker started \(pid (\d+)\))"))) return -1;
  return static_cast<pid_t>(std::stol(match[1]));
}

}  // namespace mgpu::testing
