#include "rpc/server_security.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "rpc/channel.h"

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

std::string LoadToken(const std::string& token_file, const char* environment_value) {
  if (token_file.empty()) return environment_value != nullptr ? environment_value : "";
  struct stat info {};
  if (::stat(token_file.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw BadInputError(fmt::format("--token-file {}: not a readable file; give the file holding the token", token_file));
  }
  if ((info.st_mode & 077) != 0) {
    throw BadInputError(fmt::format("--token-file {}: other users can read it (mode {:o}); make it private with "
                                    "`chmod 600 {}`",
                                    token_file, info.st_mode & 0777, token_file));
  }
  std::string token = ReadFile(token_file);
  token = token.substr(0, token.find_first_of("\r\n"));
  if (token.empty()) throw BadInputError(fmt::format("--token-file {}: the first line is empty; put the token there", token_file));
  return token;
}

std::string TokenOnCommandLineMessage(const std::string& program) {
  return fmt::format("{}: --token would show the secret to every user of this machine (ps, /proc); put it in a file "
                     "only you can read and pass --token-file FILE, or set MGPU_TOKEN",
                     program);
}

std::string JoinHostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos && host.front() != '[' ? fmt::format("[{}]:{}", host, port)
                                                                     : fmt::format("{}:{}", host, port);
}

}  // namespace mgpu
