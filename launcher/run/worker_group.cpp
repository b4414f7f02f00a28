#include "launcher/run/worker_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "common/status.h"
#include "launcher/run/job_state.h"

namespace mgpu {
namespace {

constexpr size_t kLogTailBytes = 8 * 1024;

// Lines from several workers reach the terminal whole.
std::mutex& TerminalMutex() {
  static std::mutex mutex;
  return mutex;
}

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// The last lines of `text`, at most kLogTailBytes, cut at a line start.
std::string Tail(const std::string& text) {
  if (text.size() <= kLogTailBytes) return text;
  std::string tail = text.substr(text.size() - kLogTailBytes);
  const size_t newline = tail.find('\n');
  return newline == std::string::npos ? tail : tail.substr(newline + 1);
}

}  // namespace

struct WorkerGroup::Worker {
  WorkerSpec spec;
  pid_t pid = -1;
  int output_fd = -1;
  bool exited = false;
  std::thread watcher;
};

WorkerGroup::WorkerGroup(std::function<void(const coordinator::WorkerExit&)> on_exit) : on_exit_(std::move(on_exit)) {}

WorkerGroup::~WorkerGroup() { Stop(std::chrono::milliseconds(0)); }

void WorkerGroup::Start(const std::vector<WorkerSpec>& specs) {
  const pid_t launcher = ::getpid();
  for (const WorkerSpec& spec : specs) {
    auto worker = std::make_unique<Worker>();
    worker->spec = spec;
    // Everything the child needs is prepared before fork: after it, in a process with threads,
    // only async-signal-safe calls are allowed.
    std::vector<std::string> args = spec.argv, env = spec.environment;
    std::vector<char*> arg_ptrs, env_ptrs;
    for (auto& a : args) arg_ptrs.push_back(a.data());
    arg_ptrs.push_back(nullptr);
    for (auto& e : env) env_ptrs.push_back(e.data());
    env_ptrs.push_back(nullptr);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      Stop(std::chrono::milliseconds(0));
      throw Error(ExitCode::kFailure, fmt::format("cannot create a pipe for rank {}: {}", spec.rank, std::strerror(errno)));
    }
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(126);  // the launcher died before prctl
      ::dup2(null_fd, STDIN_FILENO);
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::dup2(pipe_fds[1], STDERR_FILENO);
      // A signal the launcher inherited as ignored (a shell's `&` ignores SIGINT) would stay
      // ignored in the worker; the stop sequence relies on the signals it forwards reaching it.
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGUSR1, SIG_DFL);
      // SIGHUP keeps the launcher's disposition: ignored under nohup, as the user asked.
      ::execve(arg_ptrs[0], arg_ptrs.data(), env_ptrs.data());
      const char message[] = "mgpu run: cannot execute the worker program\n";
      WriteAll(STDERR_FILENO, message, sizeof(message) - 1);
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    if (null_fd >= 0) ::close(null_fd);
    if (pid < 0) {
      ::close(pipe_fds[0]);
      Stop(std::chrono::milliseconds(0));
      throw Error(ExitCode::kFailure, fmt::format("cannot start rank {}: fork failed: {}", spec.rank, std::strerror(errno)));
    }
    ::setpgid(pid, pid);  // also here, so the group exists before the launcher may signal it
    worker->pid = pid;
    worker->output_fd = pipe_fds[0];
    Worker* raw = worker.get();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      workers_.push_back(std::move(worker));
    }
    raw->watcher = std::thread([this, raw] { Watch(*raw); });
  }
}

void WorkerGroup::Watch(Worker& worker) {
  std::FILE* log = std::fopen(worker.spec.console_log.c_str(), "w");
  const std::string prefix = fmt::format("[rank {}] ", worker.spec.rank);
  std::string tail, line;
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(worker.output_fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file: the worker has exited (its pipe closes at exit)
    const std::string chunk(buffer, static_cast<size_t>(n));
    if (log != nullptr) {
      std::fwrite(chunk.data(), 1, chunk.size(), log);
      std::fflush(log);
    }
    tail = Tail(tail + chunk);
    if (!worker.spec.to_terminal) continue;
    if (!worker.spec.prefix_lines) {
      std::lock_guard<std::mutex> lock(TerminalMutex());
      WriteAll(STDERR_FILENO, chunk.data(), chunk.size());
      continue;
    }
    line += chunk;
    size_t newline;
    while ((newline = line.find('\n')) != std::string::npos) {
      std::string whole = line.substr(0, newline + 1);
      line.erase(0, newline + 1);
      if (whole.rfind(prefix, 0) != 0) whole = prefix + whole;
      std::lock_guard<std::mutex> lock(TerminalMutex());
      WriteAll(STDERR_FILENO, whole.data(), whole.size());
    }
  }
  const int64_t ended_at = UnixMillis();
  if (!line.empty() && worker.spec.to_terminal) {
    line = (line.rfind(prefix, 0) == 0 ? line : prefix + line) + "\n";
    std::lock_guard<std::mutex> lock(TerminalMutex());
    WriteAll(STDERR_FILENO, line.data(), line.size());
  }
  if (log != nullptr) std::fclose(log);
  ::close(worker.output_fd);
  int status = 0;
  while (::waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
  }
  coordinator::WorkerExit exit;
  exit.set_rank(worker.spec.rank);
  exit.set_exit_code(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  exit.set_signal(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  exit.set_log_tail(tail);
  exit.set_unix_millis(ended_at);
  on_exit_(exit);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    worker.exited = true;
  }
  exited_.notify_all();
}

void WorkerGroup::Stop(std::chrono::milliseconds grace, int signal) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto signal_running = [&](int signal) {
    for (auto& worker : workers_) {
      if (!worker->exited) ::kill(-worker->pid, signal);
    }
  };
  auto all_exited = [&] {
    for (auto& worker : workers_) {
      if (!worker->exited) return false;
    }
    return true;
  };
  if (!all_exited()) {
    signal_running(signal);
    if (!exited_.wait_for(lock, grace, all_exited)) signal_running(SIGKILL);
    exited_.wait(lock, all_exited);
  }
  for (auto& worker : workers_) {
    if (worker->watcher.joinable()) {
      lock.unlock();
      worker->watcher.join();
      lock.lock();
    }
  }
}

bool WorkerGroup::AllExited() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& worker : workers_) {
    if (!worker->exited) return false;
  }
  return true;
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<pid_t> pids;
  for (auto& worker : workers_) pids.push_back(worker->pid);
  return pids;
}

}  // namespace mgpu
