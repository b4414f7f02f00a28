#include "launcher/serve/peer_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <grpcpp/server_posix.h>

#include "common/status.h"

namespace mgpu {
namespace {

constexpr int kPollMillis = 200;  // how soon the admitting thread sees a stop

}  // namespace

std::string SocketPath(const std::string& state_dir) { return state_dir + "/serve.sock"; }

bool IsSocketPeer(const std::string& grpc_peer) { return grpc_peer.rfind("fd:", 0) == 0; }

PeerSocket::PeerSocket(const std::string& path, std::vector<uid_t> allowed_uids, grpc::Server& server)
    : path_(path), allowed_uids_(std::move(allowed_uids)), server_(server) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    throw BadInputError(fmt::format("the socket {} would be {} bytes long; Unix sockets take at most {}: use a "
                                    "shorter --state-dir",
                                    path, path.size(), sizeof(address.sun_path) - 1));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0) {
    if (!S_ISSOCK(info.st_mode)) {
      throw BadInputError(fmt::format("{} exists and is not a socket; move it away: mgpu serve listens there", path));
    }
    ::unlink(path.c_str());  // left by a service that was killed
  }
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw Error(ExitCode::kFailure, fmt::format("cannot create a Unix socket: {}", std::strerror(errno)));
  // Nobody can connect before listen(), so the mode is set before anyone could use a wider one.
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::chmod(path.c_str(), 0600) != 0 ||
      ::listen(fd_, 64) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd_);
    throw Error(ExitCode::kFailure, fmt::format("cannot listen on {}: {}", path, error));
  }
  thread_ = std::thread([this] { Admit(); });
}

PeerSocket::~PeerSocket() {
  stopping_ = true;
  thread_.join();
  ::close(fd_);
  ::unlink(path_.c_str());
}

void PeerSocket::Admit() {
  while (!stopping_) {
    pollfd ready{fd_, POLLIN, 0};
    if (::poll(&ready, 1, kPollMillis) <= 0) continue;
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) continue;
    ucred peer{};
    socklen_t length = sizeof(peer);
    const bool known = ::getsockopt(client, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0;
    if (!known || std::find(allowed_uids_.begin(), allowed_uids_.end(), peer.uid) == allowed_uids_.end()) {
      std::fprintf(stderr, "mgpu serve: refused a connection on %s from uid %d (pid %d): only the service's user "
                   "and root may use it\n",
                   path_.c_str(), known ? static_cast<int>(peer.uid) : -1, known ? static_cast<int>(peer.pid) : -1);
      ::close(client);
      continue;
    }
    grpc::AddInsecureChannelFromFd(&server_, client);  // the server owns it from here
  }
}

}  // namespace mgpu
