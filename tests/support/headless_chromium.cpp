#include "tests/support/headless_chromium.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/files.h"

extern char** environ;

namespace mgpu::testing {
namespace {

using Clock = std::chrono::steady_clock;

// How long the browser's helpers may take to exit after its main process did.
constexpr std::chrono::seconds kShutdownGrace{10};
constexpr std::chrono::milliseconds kPoll{20};

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// This process's children, zombies included: as subreaper it inherits every orphaned browser
// process.
std::vector<int> Children() {
  std::vector<int> pids;
  for (const std::string& name : ListDirectory("/proc")) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat;
    try {
      stat = ReadFile("/proc/" + name + "/stat");
    } catch (const std::exception&) {
      continue;  // it exited meanwhile
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    std::istringstream fields(stat.substr(stat.rfind(')') + 1));
    std::string state;
    int ppid = 0;
    fields >> state >> ppid;
    if (ppid == ::getpid()) pids.push_back(std::stoi(name));
  }
  return pids;
}

// Reaps the children until none is left; after `kShutdownGrace`, kills the ones still there.
std::vector<int> ReapEverything() {
  std::vector<int> killed;
  const auto deadline = Clock::now() + kShutdownGrace;
  while (true) {
    int status = 0;
    const pid_t reaped = ::waitpid(-1, &status, WNOHANG);
    if (reaped > 0) continue;
    if (reaped < 0 && errno == ECHILD) return killed;
    if (reaped < 0 && errno != EINTR) throw std::runtime_error("waitpid failed while reaping the browser");
    if (Clock::now() > deadline) {
      for (int pid : Children()) {
        if (std::find(killed.begin(), killed.end(), pid) == killed.end()) killed.push_back(pid);
        ::kill(pid, SIGKILL);
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace

BrowserResult RunHeadlessChromium(const std::string& chromium, const std::string& work_dir,
                                  const std::vector<std::string>& flags, const std::string& url,
                                  double timeout_seconds) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw std::runtime_error("cannot become a child subreaper");
  MakeDirectories(work_dir);
  const std::string stdout_path = work_dir + "/stdout.txt", stderr_path = work_dir + "/stderr.txt";
  std::vector<std::string> args = {chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                                   "--user-data-dir=" + work_dir + "/profile", "--no-first-run"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(url);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // Its own process group, so that a timeout reaches the wrapper script and the browser at once.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, chromium.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) throw std::runtime_error("cannot start " + chromium);

  BrowserResult result;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  result.exit_code = ExitCode(status);
  result.left_behind = ReapEverything();
  result.stdout_text = ReadFile(stdout_path);
  result.stderr_text = ReadFile(stderr_path);
  return result;
}

}  // namespace mgpu::testing
