#include "launcher/run/coordinator_server.h"

#include "coordinator/coordinator.grpc.pb.h"
#include "rpc/grpc_server.h"

namespace mgpu {
namespace {

// Requests are small; a bound keeps a confused or hostile peer from making the launcher
// allocate much.
constexpr int kMaxMessageBytes = 1 << 20;

}  // namespace

class CoordinatorServer::Service : public coordinator::Coordinator::CallbackService {
 public:
  Service(JobState& state, std::string token) : state_(state), token_(std::move(token)) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context, const coordinator::RegisterRequest* request,
                                     coordinator::Assignment* reply) override {
    return Answer(context, [&] { return state_.Register(*request, reply); });
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context, const coordinator::WorkerReport* request,
                                      coordinator::HeartbeatReply*) override {
    return Answer(context, [&] { return state_.Heartbeat(*request); });
  }
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const coordinator::FinishRequest* request,
                                   coordinator::FinishReply*) override {
    return Answer(context, [&] { return state_.Finish(*request); });
  }
  grpc::ServerUnaryReactor* JoinNode(grpc::CallbackServerContext* context, const coordinator::JoinNodeRequest* request,
                                     coordinator::JoinNodeReply* reply) override {
    return Answer(context, [&] { return state_.JoinNode(*request, reply); });
  }
  grpc::ServerUnaryReactor* NodeReport(grpc::CallbackServerContext* context,
                                       const coordinator::NodeReportRequest* request,
                                       coordinator::NodeReportReply* reply) override {
    return Answer(context, [&] { return state_.NodeReport(*request, reply); });
  }

 private:
  grpc::Status Authenticate(const grpc::CallbackServerContext& context) const {
    return CheckToken(context, token_,
                      "this coordinator requires a token: send `authorization: Bearer <token>` (workers started by "
                      "mgpu run get it as MGPU_TOKEN; other nodes need the same --token or MGPU_TOKEN)",
                      "wrong token: give every node the same --token (or MGPU_TOKEN)");
  }

  template <typename Body>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, Body body) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const grpc::Status allowed = Authenticate(*context);
    reactor->Finish(allowed.ok() ? body() : allowed);
    return reactor;
  }

  JobState& state_;
  std::string token_;
};

CoordinatorServer::CoordinatorServer(JobState& state, const std::string& host, int port, const ServerSecurity& security)
    : service_(std::make_unique<Service>(state, security.token)) {
  StartedServer started = StartGrpcServer(*service_, host, port, security, kMaxMessageBytes,
                                          "pick another --coordinator-port or --master-addr");
  server_ = std::move(started.server);
  address_ = JoinHostPort(host, started.port);
}

CoordinatorServer::~CoordinatorServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace mgpu
