// The gRPC server of `mgpu serve`: the JobService of proto/service/job_service.proto on gRPC's
// callback API, over a JobManager.
//
// It listens on a Unix socket (launcher/serve/peer_socket.h: only allowed uids connect) and, when
// asked, on TCP. Every call is authenticated first: one over the socket by its connection's peer
// credentials, one over TCP by the token it must carry (`authorization: Bearer <token>`,
// compared in constant time; UNAUTHENTICATED otherwise, and always when the server has no token) and its request validated before the manager sees it
// (sizes, ids, ranks, priorities: INVALID_ARGUMENT saying what is wrong); messages are bounded
// to 1 MiB and open streams to a fixed number. An unexpected error inside a call fails that call
// with INTERNAL; the service itself keeps serving.
//
// Watch and Logs are server streams fed by polling: a stream sends its next message as soon as
// the previous one is out and something new exists (a changed job, more log bytes), and one
// thread looks for news on every open stream four times a second.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "launcher/serve/job_manager.h"
#include "rpc/server_security.h"

namespace mgpu {

class JobStreams;
class PeerSocket;

struct JobEndpoints {
  std::string socket_path;          // the Unix socket; "": none
  std::vector<uid_t> socket_uids;   // the peers it admits
  std::string tcp_host;             // "": no TCP
  int tcp_port = 0;                 // 0: a free one
  ServerSecurity security;          // for TCP: the token every call needs, TLS
};

class JobServer {
 public:
  // Serves at `endpoints`. Throws BadInputError naming the address when it cannot listen there,
  // or a TLS file cannot be read.
  JobServer(JobManager& manager, const JobEndpoints& endpoints);
  // Ends open streams and waits (up to a second) for calls in progress.
  ~JobServer();

  // "host:port" as clients dial it; "" without TCP.
  const std::string& tcp_address() const { return tcp_address_; }
  // "unix:<path>"; "" without a socket.
  std::string socket_address() const;

 private:
  class Service;
  std::unique_ptr<JobStreams> streams_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PeerSocket> socket_;
  std::string tcp_address_;
};

}  // namespace mgpu
