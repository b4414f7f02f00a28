// The one way mgpu starts a gRPC server (the coordinator of `mgpu run`, the job service of
// `mgpu serve`): one service, credentials from ServerSecurity, a bound on message size, and a port
// of its own (no SO_REUSEPORT sharing with another process).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "rpc/server_security.h"

namespace mgpu {

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the TCP port bound (the one asked for, or the kernel's pick for 0); 0 without TCP
};

// Starts `service` listening at `host`:`port` with `security`'s credentials; an empty `host`
// listens on no TCP port (the caller serves it through a socket of its own, e.g. PeerSocket).
// Messages above `max_message_bytes` are refused. Throws BadInputError saying the address is
// taken or not of this machine, followed by `remedy` (the flag to change).
StartedServer StartGrpcServer(grpc::Service& service, const std::string& host, int port, const ServerSecurity& security,
                              int max_message_bytes, const std::string& remedy);

}  // namespace mgpu
