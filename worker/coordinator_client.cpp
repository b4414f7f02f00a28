#include "worker/coordinator_client.h"

#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "worker/worker_status.h"

namespace mgpu {
namespace {

constexpr auto kRegisterDeadline = std::chrono::seconds(30);
constexpr int kFinishAttempts = 2;
constexpr size_t kMaxErrorBytes = 64 * 1024;

std::string HostName() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

coordinator::StepMetrics ToProto(const StepMetrics& m) {
  coordinator::StepMetrics proto;
  proto.set_step(m.step);
  proto.set_epoch(m.epoch);
  proto.set_loss(m.loss);
  proto.set_learning_rate(m.lr);
  proto.set_step_seconds(m.step_seconds);
  proto.set_data_wait_seconds(m.data_wait_seconds);
  proto.set_images_per_second(m.images_per_second);
  return proto;
}

coordinator::WorkerReport ReportOf(int rank, const WorkerStatus::Snapshot& snapshot) {
  coordinator::WorkerReport report;
  report.set_rank(rank);
  report.set_step(snapshot.step);
  report.set_epoch(snapshot.epoch);
  report.set_phase(snapshot.phase);
  report.set_seconds_since_progress(snapshot.seconds_since_progress);
  if (snapshot.collective) {
    report.set_pending_collective(snapshot.collective->what.substr(0, 256));
    report.set_pending_collective_seconds(snapshot.collective->seconds);
  }
  if (snapshot.metrics) *report.mutable_metrics() = ToProto(*snapshot.metrics);
  return report;
}

// Whether the launcher answered a call, whatever it said: a call that found no connection, or
// no answer by its deadline, was not answered.
bool Answered(const grpc::Status& status) {
  return status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
         status.error_code() != grpc::StatusCode::UNAVAILABLE;
}

}  // namespace

std::unique_ptr<CoordinatorClient> CoordinatorClient::FromEnvironment(const EnvLookup& env) {
  const char* address = env("MGPU_COORDINATOR");
  if (address == nullptr || *address == '\0') return nullptr;
  const char* token = env("MGPU_TOKEN");
  const char* ca = env("MGPU_TLS_CA");
  return std::make_unique<CoordinatorClient>(address, token != nullptr ? token : "", ca != nullptr ? ca : "");
}

CoordinatorClient::CoordinatorClient(const std::string& address, std::string token, const std::string& tls_ca_file)
    : address_(address),
      token_(std::move(token)),
      tls_(!tls_ca_file.empty()),
      stub_(coordinator::Coordinator::NewStub(MakeCoordinatorChannel(address, tls_ca_file))) {}

CoordinatorClient::~CoordinatorClient() { StopHeartbeats(); }

coordinator::Assignment CoordinatorClient::Register(const WorldInfo& world, const std::string& device) {
  coordinator::RegisterRequest request;
  request.set_host(HostName());
  request.set_pid(::getpid());
  request.set_rank(world.rank);
  request.set_local_rank(world.local_rank);
  request.set_world_size(world.world_size);
  request.set_device(device);
  for (const char* capability : {"ddp", "gloo", "mpi"}) request.add_capabilities(capability);
#ifdef MGPU_WITH_CUDA
  request.add_capabilities("cuda");
#endif
#ifdef MGPU_WITH_NCCL
  request.add_capabilities("nccl");
#endif
  grpc::ClientContext context;
  AddToken(context, token_);
  context.set_deadline(std::chrono::system_clock::now() + kRegisterDeadline);
  context.set_wait_for_ready(true);  // the launcher may still be starting its server
  coordinator::Assignment assignment;
  const grpc::Status status = stub_->Register(&context, request, &assignment);
  if (!status.ok()) {
    const ExitCode code = status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                                  status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                                  status.error_code() == grpc::StatusCode::ALREADY_EXISTS
                              ? ExitCode::kBadInput
                              : ExitCode::kFailure;
    const bool unreachable = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                             status.error_code() == grpc::StatusCode::UNAVAILABLE;
    const std::string hint =
        !unreachable ? ""
        : tls_ ? "; over TLS this is what an untrusted certificate looks like: MGPU_TLS_CA (the launcher's "
                 "--tls-ca) must be the CA that signed the coordinator's --tls-cert, and the certificate must "
                 "name the address (subjectAltName)"
               : "; is the launcher still running, and is the address reachable from this host?";
    throw Error(code, fmt::format("the coordinator at {} (MGPU_COORDINATOR) refused rank {}: {}{}", address_,
                                  world.rank, status.error_message(), hint));
  }
  if (assignment.rank() != world.rank || assignment.world_size() != world.world_size) {
    throw Error(ExitCode::kFailure,
                fmt::format("the coordinator at {} assigned rank {} of {}, but this worker was started as "
                            "rank {} of {} (RANK, WORLD_SIZE); the launcher and its workers disagree",
                            address_, assignment.rank(), assignment.world_size(), world.rank, world.world_size));
  }
  rank_ = assignment.rank();
  return assignment;
}

void CoordinatorClient::StartHeartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds launcher_timeout,
                                        LauncherLost on_lost) {
  heartbeat_ = std::thread([this, interval, launcher_timeout, on_lost = std::move(on_lost)] {
    HeartbeatLoop(interval, launcher_timeout, on_lost);
  });
}

grpc::Status CoordinatorClient::SendHeartbeat(std::chrono::milliseconds deadline, bool cancellable) {
  const coordinator::WorkerReport report = ReportOf(rank_, WorkerStatus::Current().Take());
  grpc::ClientContext context;
  AddToken(context, token_);
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  if (cancellable) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return grpc::Status::CANCELLED;
    in_flight_ = &context;  // StopHeartbeats cancels it
  }
  coordinator::HeartbeatReply reply;
  const grpc::Status status = stub_->Heartbeat(&context, report, &reply);
  if (cancellable) {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_ = nullptr;
  }
  return status;
}

void CoordinatorClient::HeartbeatLoop(std::chrono::milliseconds interval, std::chrono::milliseconds launcher_timeout,
                                      const LauncherLost& on_lost) {
  using Clock = std::chrono::steady_clock;
  auto last_answer = Clock::now();
  while (true) {
    // A heartbeat must not outlast the time left before the launcher counts as lost.
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_answer);
    const grpc::Status status = SendHeartbeat(std::max(interval, launcher_timeout - silent), true);
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (Answered(status)) {
      last_answer = Clock::now();
    } else if (Clock::now() - last_answer >= launcher_timeout) {
      lock.unlock();
      const double seconds = std::chrono::duration<double>(Clock::now() - last_answer).count();
      GiveUpOnLauncher(fmt::format("the launcher (mgpu run, coordinator at {}) stopped answering: no heartbeat "
                                   "answered for {:.1f} s, past its --heartbeat-timeout of {:g} s (last error: {}); "
                                   "mgpu run was stopped (SIGSTOP, Ctrl-Z, a debugger), its host is unreachable, or "
                                   "it died, so this worker stops by itself",
                                   address_, seconds, launcher_timeout.count() / 1000.0, status.error_message()),
                       on_lost);
      return;
    }
    wake_.wait_for(lock, interval, [this] { return stopping_; });
    if (stopping_) return;
  }
}

void CoordinatorClient::GiveUpOnLauncher(const std::string& reason, const LauncherLost& on_lost) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launcher_lost_ = true;
  }
  on_lost(reason);
  std::unique_lock<std::mutex> lock(mutex_);
  if (wake_.wait_for(lock, kExitGrace, [this] { return stopping_; })) return;
  // The training thread is stuck where it cannot notice: in a collective, a read, or a write to
  // the stopped launcher's full pipe. Say why only where that cannot block this thread too.
  const std::string line = fmt::format("mgpu-worker (rank {}): {}; the worker did not stop within {} s, so the "
                                       "process ends now\n",
                                       rank_, reason, kExitGrace.count());
  pollfd error_output{STDERR_FILENO, POLLOUT, 0};
  if (::poll(&error_output, 1, 0) == 1 && (error_output.revents & POLLOUT) != 0) {
    const ssize_t written = ::write(STDERR_FILENO, line.data(), std::min<size_t>(line.size(), PIPE_BUF));
    (void)written;  // nothing more can be done about output that cannot be written
  }
  std::_Exit(static_cast<int>(ExitCode::kFailure));
}

void CoordinatorClient::StopHeartbeats() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void CoordinatorClient::Finish(const coordinator::FinishRequest& outcome) {
  if (rank_ < 0) return;  // never registered: the coordinator knows nothing to finish
  StopHeartbeats();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (launcher_lost_) return;
  }
  const auto deadline = std::chrono::system_clock::now() + 2 * kFinishDeadline;
  // The last heartbeat carries the latest metrics row; a launcher that does not answer it would
  // not answer the report either.
  if (!Answered(SendHeartbeat(kFinishDeadline, false))) return;
  coordinator::FinishRequest request = outcome;
  request.set_rank(rank_);
  if (request.error().size() > kMaxErrorBytes) {
    size_t cut = kMaxErrorBytes;  // on a UTF-8 character boundary: proto strings must be UTF-8
    while (cut > 0 && (static_cast<unsigned char>(request.error()[cut]) & 0xC0) == 0x80) --cut;
    request.mutable_error()->resize(cut);
  }
  for (int attempt = 0; attempt < kFinishAttempts; ++attempt) {
    grpc::ClientContext context;
    AddToken(context, token_);
    context.set_deadline(deadline);
    context.set_wait_for_ready(attempt > 0);  // the retry waits for the connection to come back
    coordinator::FinishReply reply;
    // Only a failed connection is worth a retry; an answer, or none by the deadline, is final.
    if (stub_->Finish(&context, request, &reply).error_code() != grpc::StatusCode::UNAVAILABLE) return;
  }
}

}  // namespace mgpu
