#include "launcher/child_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/files.h"
#include "common/status.h"
#include "common/stop_signal.h"

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
  // Polled rather than blocking in waitpid, so that a stop signal is passed on while the child runs.
  constexpr auto kPollInterval = std::chrono::milliseconds(50);
  int status = 0;
  bool passed_on = false;
  for (;;) {
    const pid_t ended = ::waitpid(pid, &status, WNOHANG);
    if (ended == pid) break;
    if (ended < 0 && errno != EINTR) throw Error(ExitCode::kFailure, "waitpid failed: " + std::string(std::strerror(errno)));
    if (const int signal = ReceivedStopSignal(); signal != 0 && !passed_on) {
      ::kill(pid, signal);
      passed_on = true;
    }
    std::this_thread::sleep_for(kPollInterval);
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
