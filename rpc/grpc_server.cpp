#include "rpc/grpc_server.h"

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

StartedServer StartGrpcServer(grpc::Service& service, const std::string& host, int port, const ServerSecurity& security,
                              int max_message_bytes, const std::string& remedy) {
  const std::string listen = JoinHostPort(host, port);
  grpc::ServerBuilder builder;
  StartedServer started;
  if (!host.empty()) builder.AddListeningPort(listen, MakeServerCredentials(security), &started.port);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  // One port, one server: without this gRPC would share a port with another process.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  started.server = builder.BuildAndStart();
  if (!started.server || (!host.empty() && started.port == 0)) {
    throw BadInputError(fmt::format("cannot serve at {}: the address is taken or not of this machine; {}", listen,
                                    remedy));
  }
  return started;
}

}  // namespace mgpu
