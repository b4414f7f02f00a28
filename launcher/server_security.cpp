#include "launcher/server_security.h"

#include <fmt/format.h>

#include "common/files.h"
#include "worker/coordinator_client.h"

namespace mgpu {
namespace {

// Compares in time independent of where the strings differ (the length may show).
bool SameSecret(const std::string& given, const std::string& token) {
  if (given.size() != token.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < given.size(); ++i) difference |= static_cast<unsigned char>(given[i] ^ token[i]);
  return difference == 0;
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security) {
  if (security.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({ReadFile(security.tls_key), ReadFile(security.tls_cert)});
  return grpc::SslServerCredentials(options);
}

grpc::Status CheckToken(const grpc::CallbackServerContext& context, const std::string& token,
                        const std::string& missing, const std::string& wrong) {
  if (token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find(kAuthorizationMetadata);
  if (found == metadata.end()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, missing);
  const std::string given(found->second.data(), found->second.size());
  if (given.rfind(kBearerPrefix, 0) != 0 || !SameSecret(given.substr(std::string(kBearerPrefix).size()), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, wrong);
  }
  return grpc::Status::OK;
}

std::string JoinHostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos && host.front() != '[' ? fmt::format("[{}]:{}", host, port)
                                                                     : fmt::format("{}:{}", host, port);
}

}  // namespace mgpu
