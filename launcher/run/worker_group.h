// The worker processes one launcher runs on its node: started each in its own process group,
// with a parent-death signal (SIGKILL) so none outlives the launcher; their console output
// (stdout and stderr) goes to a file per rank and, for some ranks, to the launcher's stderr;
// their ends are seen the moment they happen, with a wall-clock time, so the first failure of a
// job can be told from its consequences.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/coordinator.pb.h"

namespace mgpu {

struct WorkerSpec {
  int rank = 0;
  std::vector<std::string> argv;         // argv[0]: the executable's path
  std::vector<std::string> environment;  // the whole environment, "NAME=value"
  std::string console_log;               // file receiving stdout and stderr
  bool to_terminal = false;              // also copy the output to this process's stderr
  bool prefix_lines = false;             // ... with "[rank K] " before lines that lack it
};

class WorkerGroup {
 public:
  // `on_exit` runs on a watcher thread when a worker ends (exit status, time, log tail).
  explicit WorkerGroup(std::function<void(const coordinator::WorkerExit&)> on_exit);
  ~WorkerGroup();  // Stop()s what still runs
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts one process per spec. Throws mgpu::Error when one cannot be started (after stopping
  // those already started).
  void Start(const std::vector<WorkerSpec>& specs);
  // `signal` (SIGTERM, or the stop signal the launcher forwards) to every running worker's
  // process group; after `grace`, SIGKILL to those left. Returns once every worker has been reaped.
  void Stop(std::chrono::milliseconds grace, int signal = SIGTERM);
  bool AllExited() const;
  // Process ids of the workers started (running or not), by start order.
  std::vector<pid_t> pids() const;

 private:
  struct Worker;
  void Watch(Worker& worker);

  std::function<void(const coordinator::WorkerExit&)> on_exit_;
  std::vector<std::unique_ptr<Worker>> workers_;
  mutable std::mutex mutex_;
  std::condition_variable exited_;
};

}  // namespace mgpu
