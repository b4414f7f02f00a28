#include "tests/support/test_support.h"

#include "common/files.h"
#include "common/server_ports.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace mgpu::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/mgpu-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  RemoveTree(path_);
}

double Float32ReorderingTolerance(int64_t steps, int64_t longest_sum) {
  constexpr double kFeedbackAllowance = 10;
  const double unit_roundoff = std::ldexp(1.0, -24);
  const double one_gradient = 2 * std::ceil(std::log2(static_cast<double>(longest_sum))) * unit_roundoff;
  return kFeedbackAllowance * static_cast<double>(steps) * one_gradient;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error("cannot write " + path);
  gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(file);
}

std::string IdxBytes(const std::vector<int64_t>& dims, const std::string& data) {
  std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
  for (int64_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  return bytes + data;
}

void WriteTinyMnistLike(const std::string& folder, int train, int test, int size) {
  auto write_split = [&](const std::string& prefix, int n) {
    std::string pixels, labels;
    for (int i = 0; i < n; ++i) {
      const int label = i % 10;
      labels.push_back(static_cast<char>(label));
      for (int p = 0; p < size * size; ++p) {
        // A bright band whose row depends on the class, plus a little per-sample variation.
        const int row = p / size;
        const bool on = row >= 2 * label + 4 && row < 2 * label + 7;
        pixels.push_back(static_cast<char>(on ? 200 + (i * 7 + p) % 50 : (i + p) % 20));
      }
    }
    WriteGzip(folder + "/" + prefix + "-images-idx3-ubyte.gz", IdxBytes({n, size, size}, pixels));
    WriteGzip(folder + "/" + prefix + "-labels-idx1-ubyte.gz", IdxBytes({n}, labels));
  };
  MakeDirectories(folder);
  write_split("train", train);
  write_split("t10k", test);
}

namespace {

// A waitpid status as a shell reports it: the exit code, or 128 + the signal that ended the process.
int ExitCodeOf(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  return BackgroundCommand(argv, extra_env).Wait();
}

BackgroundCommand::BackgroundCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                                     ProcessGroup group) {
  // Close-on-exec: the child gets the pipe as its stdout and stderr only, so a grandchild that
  // redirects both (a daemon, a detached job) does not keep it open under another number.
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> env_ptrs, arg_ptrs;
  for (auto& e : env_strings) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  // The stop signals start at their default actions, as from a terminal, however this test was
  // started (`nohup` ignores SIGHUP, a shell's `&` SIGINT): the tests that send them rely on it.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal : {SIGHUP, SIGINT, SIGTERM, SIGUSR1}) sigaddset(&defaults, signal);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (group == ProcessGroup::kOwn) {
    posix_spawnattr_setpgroup(&attributes, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attributes, flags);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0].c_str(), &actions, &attributes, arg_ptrs.data(), env_ptrs.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    throw std::runtime_error("cannot start " + args[0]);
  }
  pid_ = pid;
  output_fd_ = pipe_fds[0];
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) WaitAtMost(0);  // kills it
}

CommandResult BackgroundCommand::WaitAtMost(double seconds) {
  using Clock = std::chrono::steady_clock;
  // Output still open this long after the process ended is held by a process it left behind
  // (which inherited the pipe): not waited for, so that a test of an orphan fails, not hangs.
  constexpr auto kOrphanedPipeGrace = std::chrono::seconds(5);
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  CommandResult result;
  char buffer[4096];
  std::optional<Clock::time_point> ended;
  int status = 0;
  while (true) {
    const auto now = Clock::now();
    if (!ended && ::waitpid(pid_, &status, WNOHANG) == pid_) ended = now;
    if (!ended && now >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      ended = now;
    }
    if (ended && now >= *ended + kOrphanedPipeGrace) break;
    pollfd readable{output_fd_, POLLIN, 0};
    if (::poll(&readable, 1, 100) <= 0) continue;
    const ssize_t n = ::read(output_fd_, buffer, sizeof(buffer));
    if (n <= 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(output_fd_);
  if (!ended) ::waitpid(pid_, &status, 0);
  pid_ = -1;
  result.exit_code = ExitCodeOf(status);
  return result;
}

CommandResult BackgroundCommand::Wait() {
  CommandResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(output_fd_, buffer, sizeof(buffer))) > 0) result.output.append(buffer, static_cast<size_t>(n));
  ::close(output_fd_);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  result.exit_code = ExitCodeOf(status);
  return result;
}

int FreeLocalPort() {
  // Below the ephemeral range, so that no outgoing connection takes it before the test's rank 0
  // listens on it (common/server_ports.h); any free port where none there is.
  std::vector<int> candidates = ServerPortCandidates(EphemeralPorts(), 64);
  candidates.push_back(0);
  for (const int candidate : candidates) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(candidate));
    socklen_t length = sizeof(address);
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
    ::close(fd);
    if (bound) return ntohs(address.sin_port);
  }
  throw std::runtime_error("cannot find a free port");
}

std::vector<std::string> TorchrunEnvironment(int rank, int world_size, int port) {
  return {"RANK=" + std::to_string(rank),       "WORLD_SIZE=" + std::to_string(world_size),
          "LOCAL_RANK=" + std::to_string(rank), "LOCAL_WORLD_SIZE=" + std::to_string(world_size),
          "MASTER_ADDR=127.0.0.1",              "MASTER_PORT=" + std::to_string(port)};
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int LineCount(const std::string& path) {
  if (!PathExists(path)) return 0;
  const std::string text = ReadText(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

bool WaitFor(const std::function<bool()>& condition, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

std::string SectionOf(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<section id=\"" + id + "\">");
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</section>", begin) - begin);
}

}  // namespace mgpu::testing
