// A worker's side of the coordinator service (proto/coordinator/coordinator.proto), used when
// `mgpu run` started it: MGPU_COORDINATOR holds the coordinator's address, MGPU_TOKEN its token
// (if any) and MGPU_TLS_CA the CA certificate to trust (if it serves TLS).
//
// Register once before joining the other ranks, StartHeartbeats right after, Finish at the end.
// The heartbeat thread reads WorkerStatus::Current() and streams it every
// Assignment.heartbeat_interval_ms until Finish.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "coordinator/coordinator.grpc.pb.h"
#include "ddp/world.h"

namespace mgpu {

// Metadata carrying the shared token on every RPC: `authorization: Bearer <token>`.
inline constexpr const char* kAuthorizationMetadata = "authorization";
inline constexpr const char* kBearerPrefix = "Bearer ";

// A channel to the coordinator at `address` ("host:port"): TLS when `tls_ca_file` is given (its
// PEM is trusted), else plain TCP. Throws BadInputError if the CA file cannot be read.
std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address, const std::string& tls_ca_file);
// Adds the token (if any) to a call.
void AddToken(grpc::ClientContext& context, const std::string& token);

class CoordinatorClient {
 public:
  // nullptr when MGPU_COORDINATOR is unset (the worker runs alone, under torchrun or mpirun).
  static std::unique_ptr<CoordinatorClient> FromEnvironment(const EnvLookup& env);
  CoordinatorClient(const std::string& address, std::string token, const std::string& tls_ca_file);
  ~CoordinatorClient();  // stops the heartbeat thread

  // Throws mgpu::Error when the coordinator refuses the worker (the message is the
  // coordinator's) or cannot be reached within 30 s.
  coordinator::Assignment Register(const WorldInfo& world, const std::string& device);
  void StartHeartbeats(int interval_ms);
  // Sends a last heartbeat, closes the stream, and reports the outcome. Best effort: a
  // coordinator that is gone does not change the worker's exit code.
  void Finish(const coordinator::FinishRequest& outcome);

  const std::string& address() const { return address_; }

 private:
  void HeartbeatLoop(int interval_ms);

  std::string address_;
  std::string token_;
  bool tls_ = false;
  std::unique_ptr<coordinator::Coordinator::Stub> stub_;
  int rank_ = -1;
  std::thread heartbeat_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace mgpu
