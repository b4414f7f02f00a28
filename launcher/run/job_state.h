// The coordinator's view of one job: which ranks registered, what each last reported, how each
// ended, and which nodes joined. The gRPC service (launcher/run/coordinator_server.h) writes it and
// validates every request against it; the supervision loop (launcher/run/run_job.h) reads snapshots
// and decides. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "coordinator/coordinator.pb.h"

namespace mgpu {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds since the Unix epoch, the clock failures are ordered by.
int64_t UnixMillis();

// Seconds from `from` to `to` (negative when `to` is earlier).
double SecondsBetween(SteadyClock::time_point from, SteadyClock::time_point to);

struct RankView {
  int rank = 0;
  bool registered = false;
  std::string host;
  int64_t pid = 0;
  std::string device;
  SteadyClock::time_point last_heard{};  // last registration or report
  int64_t step = 0;
  int64_t epoch = 0;
  std::string phase = "starting";
  double seconds_since_progress = 0;     // as of last_heard
  std::string pending_collective;        // the oldest collective not yet complete, "" when none
  double pending_collective_seconds = 0; // its age, as of last_heard
  std::optional<coordinator::StepMetrics> metrics;  // the latest metrics row
  bool finished = false;                 // the worker called Finish
  coordinator::FinishRequest finish;
  int64_t finish_unix_millis = 0;
  bool exited = false;                   // its parent saw it end
  coordinator::WorkerExit exit;
};

// A node other than 0, as its launcher's JoinNode and NodeReport calls show it.
struct NodeView {
  int node_rank = 0;
  bool joined = false;
  std::string host;
  SteadyClock::time_point last_heard{};  // its join or latest report
};

class JobState {
 public:
  // `assignment` is the template every rank's assignment is made from (rank filled in).
  JobState(int world_size, int local_world_size, coordinator::Assignment assignment);

  // Forgets every rank (a restart); registrations are for `attempt` from now on.
  void StartAttempt(int attempt);
  int attempt() const;

  // RPC bodies; each returns the status the RPC answers with (INVALID_ARGUMENT,
  // ALREADY_EXISTS, FAILED_PRECONDITION with a message saying what was wrong).
  grpc::Status Register(const coordinator::RegisterRequest& request, coordinator::Assignment* assignment);
  grpc::Status Heartbeat(const coordinator::WorkerReport& report);
  grpc::Status Finish(const coordinator::FinishRequest& request);
  grpc::Status JoinNode(const coordinator::JoinNodeRequest& request, coordinator::JoinNodeReply* reply);
  grpc::Status NodeReport(const coordinator::NodeReportRequest& request, coordinator::NodeReportReply* reply);

  // A worker process ended (seen by this launcher, or reported by a node's).
  void RecordExit(const coordinator::WorkerExit& exit);
  // The job is over: nodes are told to stop with this exit code and reason.
  void EndJob(int exit_code, const std::string& reason);
  // Whether every joined node heard from within `max_silence` has been told that the job ended
  // (a lost node never asks again; waiting for it would only delay the exit).
  bool NodesToldToStop(SteadyClock::duration max_silence) const;

  std::vector<RankView> Ranks() const;
  // Nodes 1 to nnodes - 1 (node 0 is this launcher).
  std::vector<NodeView> Nodes() const;
  int world_size() const { return world_size_; }

 private:
  grpc::Status CheckRank(int rank) const;

  mutable std::mutex mutex_;
  const int world_size_;
  const int local_world_size_;
  coordinator::Assignment assignment_;
  std::vector<RankView> ranks_;
  std::vector<bool> node_joined_;
  std::vector<std::string> node_host_;
  std::vector<SteadyClock::time_point> node_last_heard_;
  std::vector<bool> node_told_to_stop_;
  bool job_over_ = false;
  int job_exit_code_ = 0;
  std::string job_end_reason_;
};

}  // namespace mgpu
