#include "launcher/serve/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

StateDirLock::StateDirLock(const std::string& dir) {
  const std::string path = dir + "/serve.lock";
  // Close-on-exec: a job's process must not keep the lock of a service that died.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ExitCode::kFailure, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw BadInputError(fmt::format("another mgpu serve{} uses the state folder {}; stop it first, or give this one "
                                    "another --state-dir",
                                    pid.empty() ? "" : " (pid " + pid + ")", dir));
  }
  // The pid only serves the message above: the lock holds whether or not it can be written.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) static_cast<void>(::pwrite(fd_, pid.data(), pid.size(), 0));
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace mgpu
