// The gRPC server of `mgpu serve`: the JobService of proto/service/job_service.proto on gRPC's
// callback API, over a JobManager.
//
// Every call is authenticated first (with a token: `authorization: Bearer <token>`, compared in
// constant time; UNAUTHENTICATED otherwise) and its request validated before the manager sees it
// (sizes, ids, ranks, priorities: INVALID_ARGUMENT saying what is wrong); messages are bounded
// to 1 MiB and open streams to a fixed number. An unexpected error inside a call fails that call
// with INTERNAL; the service itself keeps serving.
//
// Watch and Logs are server streams fed by polling: a stream sends its next message as soon as
// the previous one is out and something new exists (a changed job, more log bytes), and one
// thread looks for news on every open stream four times a second.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "launcher/job_manager.h"
#include "launcher/server_security.h"

namespace mgpu {

class JobStreams;

class JobServer {
 public:
  // Serves at host:port (port 0: a free one). Throws BadInputError naming the address when it
  // cannot listen there, or a TLS file cannot be read.
  JobServer(JobManager& manager, const std::string& host, int port, const ServerSecurity& security);
  // Ends open streams and waits (up to a second) for calls in progress.
  ~JobServer();

  // "host:port" as clients dial it.
  const std::string& address() const { return address_; }

 private:
  class Service;
  std::unique_ptr<JobStreams> streams_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace mgpu
