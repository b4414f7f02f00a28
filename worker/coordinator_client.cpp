#include "worker/coordinator_client.h"

#include <unistd.h>

#include <chrono>

#include <fmt/format.h>

#include "common/files.h"
#include "worker/worker_status.h"

namespace mgpu {
namespace {

constexpr auto kRegisterDeadline = std::chrono::seconds(30);
constexpr auto kFinishDeadline = std::chrono::seconds(5);
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

}  // namespace

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address, const std::string& tls_ca_file) {
  if (tls_ca_file.empty()) return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(tls_ca_file);
  return grpc::CreateChannel(address, grpc::SslCredentials(options));
}

void AddToken(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata(kAuthorizationMetadata, kBearerPrefix + token);
}

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

CoordinatorClient::~CoordinatorClient() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

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

void CoordinatorClient::StartHeartbeats(int interval_ms) {
  heartbeat_ = std::thread([this, interval_ms] { HeartbeatLoop(interval_ms); });
}

void CoordinatorClient::HeartbeatLoop(int interval_ms) {
  grpc::ClientContext context;
  AddToken(context, token_);
  coordinator::ReportReply reply;
  std::unique_ptr<grpc::ClientWriter<coordinator::WorkerReport>> writer = stub_->Report(&context, &reply);
  bool last = false;
  while (!last) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      last = stopping_;
    }
    const WorkerStatus::Snapshot snapshot = WorkerStatus::Current().Take();
    coordinator::WorkerReport report;
    report.set_rank(rank_);
    report.set_step(snapshot.step);
    report.set_epoch(snapshot.epoch);
    report.set_phase(snapshot.phase);
    report.set_seconds_since_progress(snapshot.seconds_since_progress);
    if (snapshot.collective) {
      report.set_pending_collective(snapshot.collective->what.substr(0, 256));
      report.set_pending_collective_seconds(snapshot.collective->seconds);
    }
    if (snapshot.metrics) *report.mutable_metrics() = ToProto(*snapshot.metrics);
    // A failed write means the coordinator is gone; the launcher's death ends this process
    // anyway (its parent-death signal), so training goes on until then.
    if (!writer->Write(report)) break;
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stopping_; });
  }
  writer->WritesDone();
  writer->Finish();
}

void CoordinatorClient::Finish(const coordinator::FinishRequest& outcome) {
  if (rank_ < 0) return;  // never registered: the coordinator knows nothing to finish
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  coordinator::FinishRequest request = outcome;
  request.set_rank(rank_);
  if (request.error().size() > kMaxErrorBytes) {
    size_t cut = kMaxErrorBytes;  // on a UTF-8 character boundary: proto strings must be UTF-8
    while (cut > 0 && (static_cast<unsigned char>(request.error()[cut]) & 0xC0) == 0x80) --cut;
    request.mutable_error()->resize(cut);
  }
  grpc::ClientContext context;
  AddToken(context, token_);
  context.set_deadline(std::chrono::system_clock::now() + kFinishDeadline);
  coordinator::FinishReply reply;
  stub_->Finish(&context, request, &reply);
}

}  // namespace mgpu
