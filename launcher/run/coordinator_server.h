// The gRPC server of `mgpu run`: the Coordinator service of proto/coordinator/coordinator.proto
// on gRPC's callback API, over a JobState. With a token, every RPC must carry
// `authorization: Bearer <token>` (compared in constant time) or is refused with
// UNAUTHENTICATED before its request is read.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "launcher/run/job_state.h"
#include "rpc/server_security.h"

namespace mgpu {

class CoordinatorServer {
 public:
  // Serves at host:port (port 0: a free one). Throws BadInputError naming the address when it
  // cannot listen there, or a TLS file cannot be read.
  CoordinatorServer(JobState& state, const std::string& host, int port, const ServerSecurity& security);
  ~CoordinatorServer();

  // "host:port" as workers must dial it.
  const std::string& address() const { return address_; }

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace mgpu
