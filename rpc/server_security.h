// What mgpu's gRPC servers (the coordinator of `mgpu run`, the job service of `mgpu serve`)
// accept: plain TCP or TLS, and optionally a shared token that every call must carry as
// `authorization: Bearer <token>` (kAuthorizationMetadata, worker/coordinator_client.h).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace mgpu {

struct ServerSecurity {
  std::string token;     // empty: no token required
  std::string tls_cert;  // PEM files; empty: plain TCP
  std::string tls_key;
};

// TLS credentials from the PEM files, else plain TCP. Throws BadInputError naming a file that
// cannot be read.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// OK when `token` is empty or the call carries it (compared in constant time); otherwise
// UNAUTHENTICATED with `missing` (no authorization entry) or `wrong` (another token) as message.
grpc::Status CheckToken(const grpc::CallbackServerContext& context, const std::string& token,
                        const std::string& missing, const std::string& wrong);

// The token of a service or client: the first line of `token_file` when given, else
// `environment_value` (MGPU_TOKEN; nullptr when unset). Never from the command line, where `ps`
// shows it to every user. Throws BadInputError when the file cannot be read, is empty, or can be
// read by users other than its owner (chmod 600 it).
std::string LoadToken(const std::string& token_file, const char* environment_value);

// The refusal of `--token VALUE` on a command line (`program` names the command), saying how to
// pass the token instead.
std::string TokenOnCommandLineMessage(const std::string& program);

// "host:port", with brackets around an IPv6 host ("[::1]:29600").
std::string JoinHostPort(const std::string& host, int port);

}  // namespace mgpu
