// One `mgpu serve` per state folder: an exclusive flock on <dir>/serve.lock, held while the
// service runs. The kernel releases it when the process ends, even by SIGKILL, so a restart
// after a crash is never refused by a stale lock. The file holds the holder's pid, for the
// message a second service gets.
#pragma once

#include <string>

namespace mgpu {

class StateDirLock {
 public:
  // Throws BadInputError naming the folder and the holder's pid when another process holds it,
  // mgpu::Error when the lock file cannot be created.
  explicit StateDirLock(const std::string& dir);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace mgpu
