// The client side of mgpu's gRPC services (the coordinator of `mgpu run`, the job service of
// `mgpu serve`): channels, and the shared token every call carries.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace mgpu {

// Metadata carrying the shared token on every RPC: `authorization: Bearer <token>`.
inline constexpr const char* kAuthorizationMetadata = "authorization";
inline constexpr const char* kBearerPrefix = "Bearer ";

// A channel to the server at `address` ("host:port", or "unix:PATH"): TLS when `tls_ca_file` is
// given (its PEM is trusted), else plain. Throws BadInputError if the CA file cannot be read.
std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address, const std::string& tls_ca_file);

// Adds the token (if any) to a call.
void AddToken(grpc::ClientContext& context, const std::string& token);

}  // namespace mgpu
