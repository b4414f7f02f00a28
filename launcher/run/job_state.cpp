#include "launcher/run/job_state.h"

#include <fmt/format.h>

namespace mgpu {
namespace {

constexpr size_t kMaxHostBytes = 255;
constexpr size_t kMaxDeviceBytes = 64;
constexpr int kMaxCapabilities = 32;
constexpr size_t kMaxCapabilityBytes = 64;
constexpr size_t kMaxPhaseBytes = 128;
constexpr size_t kMaxCollectiveBytes = 256;
constexpr size_t kMaxErrorBytes = 64 * 1024;
constexpr size_t kMaxLogTailBytes = 8 * 1024;

grpc::Status Invalid(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

grpc::Status CheckLength(const std::string& value, size_t limit, const char* field) {
  if (value.size() > limit) return Invalid(fmt::format("{} is {} bytes long; at most {} are accepted", field, value.size(), limit));
  return grpc::Status::OK;
}

}  // namespace

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

JobState::JobState(int world_size, int local_world_size, coordinator::Assignment assignment)
    : world_size_(world_size), local_world_size_(local_world_size), assignment_(std::move(assignment)) {
  const int nodes = (world_size + local_world_size - 1) / local_world_size;
  node_joined_.assign(static_cast<size_t>(nodes), false);
  node_told_to_stop_.assign(static_cast<size_t>(nodes), false);
  node_host_.assign(static_cast<size_t>(nodes), "");
  node_last_heard_.assign(static_cast<size_t>(nodes), SteadyClock::time_point{});
  StartAttempt(0);
}

void JobState::StartAttempt(int attempt) {
  std::lock_guard<std::mutex> lock(mutex_);
  assignment_.set_attempt(attempt);
  ranks_.assign(static_cast<size_t>(world_size_), RankView{});
  for (int r = 0; r < world_size_; ++r) ranks_[static_cast<size_t>(r)].rank = r;
}

int JobState::attempt() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return assignment_.attempt();
}

grpc::Status JobState::CheckRank(int rank) const {
  if (rank < 0 || rank >= world_size_) {
    return Invalid(fmt::format("rank {} is out of range: this job has ranks 0 to {}", rank, world_size_ - 1));
  }
  return grpc::Status::OK;
}

grpc::Status JobState::Register(const coordinator::RegisterRequest& request, coordinator::Assignment* assignment) {
  for (const grpc::Status& status : {CheckLength(request.host(), kMaxHostBytes, "host"),
                                     CheckLength(request.device(), kMaxDeviceBytes, "device")}) {
    if (!status.ok()) return status;
  }
  if (request.capabilities_size() > kMaxCapabilities) {
    return Invalid(fmt::format("{} capabilities; at most {} are accepted", request.capabilities_size(), kMaxCapabilities));
  }
  for (const std::string& capability : request.capabilities()) {
    if (auto status = CheckLength(capability, kMaxCapabilityBytes, "a capability"); !status.ok()) return status;
  }
  if (request.pid() <= 0) return Invalid(fmt::format("pid {} is not a process id", request.pid()));
  if (request.world_size() != world_size_) {
    return Invalid(fmt::format("the worker was started with world size {}, but this job has {} ranks",
                               request.world_size(), world_size_));
  }
  if (request.local_rank() < 0 || request.local_rank() >= local_world_size_) {
    return Invalid(fmt::format("local rank {} is out of range: each node runs ranks 0 to {}", request.local_rank(),
                               local_world_size_ - 1));
  }
  if (auto status = CheckRank(request.rank()); !status.ok()) return status;

  std::lock_guard<std::mutex> lock(mutex_);
  RankView& view = ranks_[static_cast<size_t>(request.rank())];
  if (view.registered && (view.pid != request.pid() || view.host != request.host())) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        fmt::format("rank {} is already registered by pid {} on {}; each rank registers once",
                                    request.rank(), view.pid, view.host));
  }
  view.registered = true;
  view.host = request.host();
  view.pid = request.pid();
  view.device = request.device();
  view.last_heard = SteadyClock::now();
  *assignment = assignment_;
  assignment->set_rank(request.rank());
  return grpc::Status::OK;
}

grpc::Status JobState::Heartbeat(const coordinator::WorkerReport& report) {
  if (auto status = CheckRank(report.rank()); !status.ok()) return status;
  if (auto status = CheckLength(report.phase(), kMaxPhaseBytes, "phase"); !status.ok()) return status;
  if (auto status = CheckLength(report.pending_collective(), kMaxCollectiveBytes, "pending_collective"); !status.ok()) {
    return status;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  RankView& view = ranks_[static_cast<size_t>(report.rank())];
  if (!view.registered) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("rank {} reports before it registered; call Register first", report.rank()));
  }
  view.last_heard = SteadyClock::now();
  view.step = report.step();
  view.epoch = report.epoch();
  view.phase = report.phase();
  view.seconds_since_progress = report.seconds_since_progress();
  view.pending_collective = report.pending_collective();
  view.pending_collective_seconds = report.pending_collective_seconds();
  if (report.has_metrics()) view.metrics = report.metrics();
  return grpc::Status::OK;
}

grpc::Status JobState::Finish(const coordinator::FinishRequest& request) {
  if (auto status = CheckRank(request.rank()); !status.ok()) return status;
  if (auto status = CheckLength(request.error(), kMaxErrorBytes, "error"); !status.ok()) return status;
  std::lock_guard<std::mutex> lock(mutex_);
  RankView& view = ranks_[static_cast<size_t>(request.rank())];
  if (!view.registered) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        fmt::format("rank {} finishes before it registered", request.rank()));
  }
  view.finished = true;
  view.finish = request;
  view.finish_unix_millis = UnixMillis();
  view.last_heard = SteadyClock::now();
  return grpc::Status::OK;
}

grpc::Status JobState::JoinNode(const coordinator::JoinNodeRequest& request, coordinator::JoinNodeReply* reply) {
  if (auto status = CheckLength(request.host(), kMaxHostBytes, "host"); !status.ok()) return status;
  const int nodes = static_cast<int>(node_joined_.size());
  if (request.node_rank() < 1 || request.node_rank() >= nodes) {
    return Invalid(fmt::format("node rank {} is out of range: this job's other nodes are 1 to {}", request.node_rank(),
                               nodes - 1));
  }
  if (request.nproc_per_node() != local_world_size_) {
    return Invalid(fmt::format("node {} runs {} workers, but every node of this job runs {} (--nproc-per-node)",
                               request.node_rank(), request.nproc_per_node(), local_world_size_));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (node_joined_[static_cast<size_t>(request.node_rank())]) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        fmt::format("node {} has joined already; each --node-rank joins once", request.node_rank()));
  }
  node_joined_[static_cast<size_t>(request.node_rank())] = true;
  node_host_[static_cast<size_t>(request.node_rank())] = request.host();
  node_last_heard_[static_cast<size_t>(request.node_rank())] = SteadyClock::now();
  reply->set_world_size(world_size_);
  reply->set_run_folder(assignment_.run_folder());
  reply->set_report_interval_ms(assignment_.heartbeat_interval_ms());
  return grpc::Status::OK;
}

grpc::Status JobState::NodeReport(const coordinator::NodeReportRequest& request, coordinator::NodeReportReply* reply) {
  const int nodes = static_cast<int>(node_joined_.size());
  if (request.node_rank() < 1 || request.node_rank() >= nodes) {
    return Invalid(fmt::format("node rank {} is out of range (1 to {})", request.node_rank(), nodes - 1));
  }
  for (const coordinator::WorkerExit& exit : request.exits()) {
    if (auto status = CheckRank(exit.rank()); !status.ok()) return status;
    if (exit.rank() / local_world_size_ != request.node_rank()) {
      return Invalid(fmt::format("rank {} does not run on node {}", exit.rank(), request.node_rank()));
    }
    if (auto status = CheckLength(exit.log_tail(), kMaxLogTailBytes, "log_tail"); !status.ok()) return status;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!node_joined_[static_cast<size_t>(request.node_rank())]) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          fmt::format("node {} reports before it joined; call JoinNode first", request.node_rank()));
    }
  }
  for (const coordinator::WorkerExit& exit : request.exits()) RecordExit(exit);
  std::lock_guard<std::mutex> lock(mutex_);
  node_last_heard_[static_cast<size_t>(request.node_rank())] = SteadyClock::now();
  reply->set_stop(job_over_);
  reply->set_exit_code(job_exit_code_);
  reply->set_reason(job_end_reason_);
  if (job_over_) node_told_to_stop_[static_cast<size_t>(request.node_rank())] = true;
  return grpc::Status::OK;
}

void JobState::RecordExit(const coordinator::WorkerExit& exit) {
  std::lock_guard<std::mutex> lock(mutex_);
  RankView& view = ranks_[static_cast<size_t>(exit.rank())];
  if (view.exited) return;
  view.exited = true;
  view.exit = exit;
}

void JobState::EndJob(int exit_code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  job_over_ = true;
  job_exit_code_ = exit_code;
  job_end_reason_ = reason;
}

bool JobState::NodesToldToStop(SteadyClock::duration max_silence) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = SteadyClock::now();
  for (size_t node = 1; node < node_joined_.size(); ++node) {
    const bool lost = now - node_last_heard_[node] > max_silence;
    if (node_joined_[node] && !node_told_to_stop_[node] && !lost) return false;
  }
  return true;
}

std::vector<RankView> JobState::Ranks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ranks_;
}

std::vector<NodeView> JobState::Nodes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<NodeView> nodes;
  for (size_t node = 1; node < node_joined_.size(); ++node) {
    nodes.push_back(NodeView{static_cast<int>(node), node_joined_[node], node_host_[node], node_last_heard_[node]});
  }
  return nodes;
}

}  // namespace mgpu
