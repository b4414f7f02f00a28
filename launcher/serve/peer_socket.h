// The Unix socket `mgpu serve` listens on by default: <state-dir>/serve.sock, mode 0600 in the
// state folder (mode 0700), so the kernel lets only the service's user (and root) connect. Each
// connection is then admitted by its peer's credentials (SO_PEERCRED, which the client cannot
// forge): a peer whose uid is not allowed is closed before any byte is read, and logged. Admitted
// connections are handed to the gRPC server, where their calls carry the peer "fd:N" (TCP calls
// carry "ipv4:..." or "ipv6:...").
#pragma once

#include <sys/types.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

namespace mgpu {

// The socket's path in a state folder.
std::string SocketPath(const std::string& state_dir);

// Whether a call came over a PeerSocket connection (its credentials were checked when it
// connected) rather than TCP.
bool IsSocketPeer(const std::string& grpc_peer);

class PeerSocket {
 public:
  // Binds `path` (replacing a stale socket left by a killed service; the caller holds the state
  // folder's lock), mode 0600, and starts admitting connections from `allowed_uids` into
  // `server`, which must be started and outlive this. Throws BadInputError when `path` is too
  // long for a socket or is something else, mgpu::Error when it cannot be bound.
  PeerSocket(const std::string& path, std::vector<uid_t> allowed_uids, grpc::Server& server);
  // Stops admitting and removes the socket file; admitted connections stay with the server.
  ~PeerSocket();
  PeerSocket(const PeerSocket&) = delete;
  PeerSocket& operator=(const PeerSocket&) = delete;

  // "unix:<path>", as clients dial it.
  std::string address() const { return "unix:" + path_; }

 private:
  void Admit();

  std::string path_;
  std::vector<uid_t> allowed_uids_;
  grpc::Server& server_;
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace mgpu
