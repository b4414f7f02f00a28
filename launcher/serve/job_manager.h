// The jobs of `mgpu serve`: the queue, the running jobs' processes, and the records, kept durable
// in the journal (launcher/serve/job_journal.h). The gRPC layer (launcher/serve/job_service.h) calls it;
// everything here is thread-safe.
//
// One scheduler thread starts and reaps the jobs: each runs as one `mgpu run` child process in
// its own process group (launcher/run/worker_group.h), with its output in <job folder>/console.log
// and a parent-death signal, so no job outlives a killed service (hence the scheduler thread,
// which lives as long as the service, is the one that forks). A job's devices are free once its
// process has been reaped. Cancelling sends SIGTERM to the job's process group (`mgpu run` stops
// its workers cleanly) and SIGKILL after the grace period; stopping the service does the same to
// every running job and records them interrupted.
//
// GPU slots reach a job as CUDA_VISIBLE_DEVICES. Each process gets OMP_NUM_THREADS (unless the
// service has it set): the host's cores shared out by slot, so concurrent jobs do not fight over
// cores.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/support/status.h>

#include "coordinator/coordinator.pb.h"
#include "launcher/run/job_state.h"
#include "launcher/run/worker_group.h"
#include "launcher/serve/job_journal.h"
#include "launcher/serve/job_paths.h"
#include "launcher/serve/serve_options.h"
#include "service/job_service.pb.h"

namespace mgpu {

struct ManagerOptions {
  std::string state_dir;  // absolute; the caller holds its lock
  DeviceSlots slots;
  int64_t checkpoint_every = 0;  // for jobs whose configuration has none
  std::chrono::milliseconds stop_grace{10000};
  PathPolicy paths;  // where jobs may read and write, beyond their own folder
};

class JobManager {
 public:
  // Recovers the journal in <state_dir>/jobs.journal (throws BadInputError if it is damaged)
  // and starts scheduling.
  explicit JobManager(const ManagerOptions& options);
  ~JobManager();  // Stop()s
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // What recovering the journal reported (a torn last line).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Queues a job; INVALID_ARGUMENT with the reason when it is refused, NOT_FOUND or
  // FAILED_PRECONDITION for a resume of an unknown or unresumable job.
  grpc::Status Submit(const service::SubmitRequest& request, service::SubmitReply* reply);
  void List(service::ListJobsReply* reply) const;
  grpc::Status Get(int64_t id, service::Job* job) const;
  grpc::Status Cancel(int64_t id, service::CancelReply* reply);
  // The console output a Logs call reads: the job's own (rank unset) or a rank's.
  grpc::Status LogFile(int64_t id, std::optional<int> rank, std::string* path) const;

  // Starts no more jobs, stops the running ones (recorded interrupted with `why`) and returns
  // once every job process has ended.
  void Stop(const std::string& why);

 private:
  struct Running {
    std::unique_ptr<WorkerGroup> group;
    pid_t pid = -1;
    bool exited = false;
    coordinator::WorkerExit exit;
    std::optional<SteadyClock::time_point> kill_at;  // SIGKILL then, if still running
  };

  void Schedule();
  // Each returns the process groups to destroy once the lock is released.
  std::vector<std::unique_ptr<WorkerGroup>> ReapLocked();
  void StartLocked(JobRecord& job, const std::vector<int>& slots);
  std::vector<std::string> JobEnvironment(const JobRecord& job) const;
  void SignalLocked(int64_t id, Running& running);
  // Appends to the journal; a failure is printed (the state in memory stays authoritative).
  void PersistLocked(const JobRecord& job);
  void FillJob(const JobRecord& record, service::Job* job) const;
  int QueuePositionLocked(int64_t id) const;

  const ManagerOptions options_;
  std::vector<std::string> warnings_;
  std::unique_ptr<JobJournal> journal_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<int64_t, JobRecord> jobs_;
  std::map<int64_t, Running> running_;
  std::vector<bool> free_;
  int64_t next_id_ = 1;
  bool stopping_ = false;
  std::string stop_reason_;
  std::thread scheduler_;
};

}  // namespace mgpu
