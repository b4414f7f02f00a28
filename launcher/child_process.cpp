#include "launcher/child_process.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "common/status.h"

extern char** environ;

namespace mgpu {

std::string WorkerExecutable() {
  if (const char* env = std::getenv("MGPU_WORKER"); env != nullptr && *env != '\0') return env;
  const std::string worker = ExecutableDirectory() + "/mgpu-worker";
  if (!PathExists(worker)) {
    throw Error(ExitCode::kFailure, "cannot find mgpu-worker next to this program (" + worker +
                                        "); set MGPU_WORKER to its path");
  }
  return worker;
}

std::string LauncherExecutable() {
  char path[PATH_MAX];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) throw Error(ExitCode::kFailure, "cannot find this program's path (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(length));
}

int RunAndWait(const std::vector<std::string>& argv) {
  std::vector<std::string> args = argv;
  std::vector<char*> arg_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0].c_str(), nullptr, nullptr, arg_ptrs.data(), environ);
  if (rc != 0) throw Error(ExitCode::kFailure, "cannot start " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(ExitCode::kFailure, "waitpid failed: " + std::string(std::strerror(errno)));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> LastNonEmptyLines(const std::string& output, size_t count) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    if (end > start) lines.push_back(output.substr(start, end - start));
    start = end + 1;
  }
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<long>(count));
  return lines;
}

}  // namespace mgpu
