#include "rpc/channel.h"

#include "common/files.h"

namespace mgpu {

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address, const std::string& tls_ca_file) {
  if (tls_ca_file.empty()) return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(tls_ca_file);
  return grpc::CreateChannel(address, grpc::SslCredentials(options));
}

void AddToken(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata(kAuthorizationMetadata, kBearerPrefix + token);
}

}  // namespace mgpu
